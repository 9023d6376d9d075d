"""Signed callbacks when a job ends, the Standard Webhooks way.

Each delivery carries ``webhook-id`` (the same on every retry, so receivers
can deduplicate), ``webhook-timestamp`` and ``webhook-signature``:
``v1,`` + base64 HMAC-SHA256 of ``f"{id}.{timestamp}.{body}"`` keyed with the
owner's secret (``whsec_`` + base64 key). Failed attempts are retried after
the delays in ``AGENTSITE_WEBHOOK_RETRY_S`` (the scheduler's sweep hands due
retries back to the queue); every attempt is recorded.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from datetime import timedelta
from typing import Any

import django_rq
import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.addresses import AddressRefused
from jobs.documents import JobEventName, webhook_body
from jobs.live import redis_connection
from jobs.models import Job, WebhookAttempt, WebhookDelivery, WebhookSecret
from jobs.tools.outgoing_http import pinned_request

log = logging.getLogger(__name__)

SECRET_PREFIX = "whsec_"


def webhook_secret_for(user: Any) -> str:
    """The user's signing secret, created on first use."""
    secret, _ = WebhookSecret.objects.get_or_create(
        user=user,
        defaults={"secret": SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()},
    )
    return secret.secret


def webhook_secret_rotate(user: Any) -> str:
    value = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()
    WebhookSecret.objects.update_or_create(user=user, defaults={"secret": value})
    return value


def webhook_sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def webhook_verify(
    secret: str, headers: dict[str, str], body: bytes, tolerance_s: int = 300
) -> bool:
    """What a receiver does: check the timestamp window and any of the listed signatures."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        timestamp = int(lower["webhook-timestamp"])
        message_id = lower["webhook-id"]
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    expected = webhook_sign(secret, message_id, timestamp, body)
    return any(
        hmac.compare_digest(expected, sig) for sig in lower.get("webhook-signature", "").split()
    )


def webhook_delivery_create(*, job: Job, event: JobEventName) -> WebhookDelivery:
    """Record the callback of a final state and send it once the transition commits."""
    delivery = WebhookDelivery.objects.create(
        job=job,
        message_id=f"msg_{job.id}_{event}",
        url=job.callback_url,
        payload=webhook_body(job, event, timezone.now().isoformat()),
        next_attempt_at=timezone.now(),
    )
    transaction.on_commit(lambda: webhook_enqueue(delivery.pk))
    return delivery


def webhook_enqueue(delivery_id: int) -> None:
    # "auto": enqueue now; the delivery row this names is already committed.
    django_rq.get_queue("default", connection=redis_connection(), commit_mode="auto").enqueue(
        "jobs.tasks.deliver_webhook", delivery_id, job_timeout=60, result_ttl=60
    )


def webhook_deliver(*, delivery_id: int) -> WebhookAttempt | None:
    """Make one attempt; schedule the next one, or give up after the last delay."""
    with transaction.atomic():
        # Claim the attempt so a sweep and a queued task never post twice at once.
        claimed = WebhookDelivery.objects.filter(
            pk=delivery_id, status=WebhookDelivery.Status.PENDING, next_attempt_at__isnull=False
        ).update(next_attempt_at=None)
    if claimed != 1:
        return None
    delivery = WebhookDelivery.objects.select_related("job__owner").get(pk=delivery_id)
    number = delivery.attempts + 1
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    timestamp = int(time.time())
    secret = webhook_secret_for(delivery.job.owner)
    headers = {
        "content-type": "application/json",
        "user-agent": "agentsite-webhooks/1",
        "webhook-id": delivery.message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": webhook_sign(secret, delivery.message_id, timestamp, body),
    }
    started = time.monotonic()
    status_code: int | None = None
    error = ""
    try:
        response = webhook_post(delivery.url, body, headers)
        status_code = response.status_code
        if not 200 <= status_code < 300:
            error = f"HTTP {status_code}: {response.text[:300]}"
    except AddressRefused as exc:
        error = f"refused: {exc}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    attempt = WebhookAttempt.objects.create(
        delivery=delivery,
        number=number,
        status_code=status_code,
        error=error,
        duration_ms=(time.monotonic() - started) * 1000,
    )
    delays = settings.AGENTSITE_WEBHOOK_RETRY_S
    if not error:
        fields: dict[str, Any] = {"status": WebhookDelivery.Status.DELIVERED}
    elif number > len(delays):
        fields = {"status": WebhookDelivery.Status.FAILED}
        log.warning("webhook %s given up after %d attempts", delivery.message_id, number)
    else:
        fields = {"next_attempt_at": timezone.now() + timedelta(seconds=delays[number - 1])}
    WebhookDelivery.objects.filter(pk=delivery_id).update(attempts=number, **fields)
    return attempt


def webhook_post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    """POST to the address the check approved: the name is not resolved a second time
    (DNS rebinding), and no proxy from the environment resolves it either."""
    target, host_headers, extensions = pinned_request(url)
    with httpx.Client(
        timeout=settings.AGENTSITE_WEBHOOK_TIMEOUT_S,
        follow_redirects=False,
        trust_env=False,
        limits=httpx.Limits(max_keepalive_connections=0),
    ) as client:
        return client.post(
            target, content=body, headers={**headers, **host_headers}, extensions=extensions
        )


def webhook_retries_due() -> int:
    """Hand deliveries whose retry time has come back to the queue."""
    due = list(
        WebhookDelivery.objects.filter(
            status=WebhookDelivery.Status.PENDING,
            attempts__gt=0,
            next_attempt_at__lte=timezone.now(),
        ).values_list("pk", flat=True)[:100]
    )
    for pk in due:
        webhook_enqueue(pk)
    return len(due)
