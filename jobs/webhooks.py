"""Signed webhooks, the Standard Webhooks way: a job's callback when it ends, and
any other event of a user's (``webhook_send``; a session's go through
``sessions.webhooks``).

A delivery is recorded inside the transaction that writes what it tells and
handed to the queue once that commits. Each delivery carries ``webhook-id``
(the same on every retry, so receivers can deduplicate), ``webhook-timestamp``
and ``webhook-signature``: ``v1,`` + base64 HMAC-SHA256 of
``f"{id}.{timestamp}.{body}"`` keyed with the owner's secret (``whsec_`` +
base64 key). Every body is ``{"type", "timestamp", "data"}``; a job's ``data``
is its status document. Failed attempts are retried after the delays in
``AGENTSITE_WEBHOOK_RETRY_S`` (the scheduler's sweep hands due retries back to
the queue); every attempt is recorded.
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
from typing import Any, TypedDict

import django_rq
import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agentsite.core.errors import Invalid
from agentsite.core.ids import new_id
from jobs.addresses import AddressRefused, check_url
from jobs.documents import JobEventName, WebhookBody, webhook_body
from jobs.live import redis_connection
from jobs.models import (
    CALLBACK_URL_MAX_LENGTH,
    Job,
    WebhookAttempt,
    WebhookDelivery,
    WebhookSecret,
)
from jobs.tools.outgoing_http import pinned_request

log = logging.getLogger(__name__)

SECRET_PREFIX = "whsec_"
EVENT_TYPE_MAX_LENGTH = WebhookDelivery._meta.get_field("event_type").max_length or 100


class EventBody(TypedDict):
    """The body of a delivery other than a job's callback: the shape of a job's
    (``jobs.documents.WebhookBody``), with the event's own ``data``."""

    type: str
    timestamp: str
    data: dict[str, Any]  # the event's own JSON object


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def webhook_secret_for(user: Any) -> str:
    """The user's signing secret, created on first use."""
    secret, _ = WebhookSecret.objects.get_or_create(user=user, defaults={"secret": new_secret()})
    return secret.secret


def webhook_secret_rotate(user: Any) -> str:
    value = new_secret()
    WebhookSecret.objects.update_or_create(user=user, defaults={"secret": value})
    return value


# --- where deliveries go -------------------------------------------------------------


def callback_url_check(url: str) -> str:
    """``url`` if deliveries may be posted there; Invalid (``callback_url_refused``) otherwise.

    The one rule for every address a user gives: a job's, a session's, the user's own.
    Each attempt checks the address again (``webhook_post``), as names may move.
    """
    if len(url) > CALLBACK_URL_MAX_LENGTH:
        raise Invalid(
            "callback_url_refused",
            f"The URL is longer than {CALLBACK_URL_MAX_LENGTH} characters.",
            {"max_length": CALLBACK_URL_MAX_LENGTH},
        )
    try:
        return check_url(url)
    except AddressRefused as exc:
        raise Invalid("callback_url_refused", str(exc)) from exc


def webhook_url_of(*, user_id: Any) -> str:
    """Where the user's events go when their subject names no address ("": nowhere)."""
    url = (
        WebhookSecret.objects.filter(user_id=user_id).values_list("callback_url", flat=True).first()
    )
    return url or ""


def webhook_url_set(*, user: Any, callback_url: str) -> str:
    """Set (or clear, with "") the user's own address; its secret is made with it if need be."""
    if callback_url:
        callback_url_check(callback_url)
    WebhookSecret.objects.update_or_create(
        user=user,
        defaults={"callback_url": callback_url},
        create_defaults={"callback_url": callback_url, "secret": new_secret()},
    )
    return callback_url


# --- signing and delivering ----------------------------------------------------------


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
    return webhook_delivery_record(
        owner_id=job.owner_id,
        job=job,
        event_type=str(event),
        url=job.callback_url,
        message_id=f"msg_{job.id}_{event}",
        payload=webhook_body(job, event, timezone.now().isoformat()),
    )


def webhook_send(
    *, owner_id: Any, url: str, event_type: str, data: dict[str, Any]
) -> WebhookDelivery:
    """Record an event's delivery to ``url`` and send it once the caller's transaction commits.

    Called inside the transaction that writes what the event tells, so the
    delivery commits with it or not at all, and is posted only after (committed
    before published). Signed with the owner's secret; retried as a job's callback.
    ``url`` is an address its owner gave (``callback_url_check`` approved it then;
    each attempt checks it again).
    """
    body: EventBody = {"type": event_type, "timestamp": timezone.now().isoformat(), "data": data}
    return webhook_document_send(
        owner_id=owner_id, url=url, event_type=event_type, document=dict(body), headers={}
    )


def webhook_document_send(
    *,
    owner_id: Any,
    url: str,
    event_type: str,
    document: dict[str, Any],
    headers: dict[str, str],
) -> WebhookDelivery:
    """As ``webhook_send``, for a receiver that expects ``document`` itself as the body
    (a protocol's own notification) and ``headers`` with it; still signed and retried."""
    if not event_type or len(event_type) > EVENT_TYPE_MAX_LENGTH:
        raise ValueError(f"an event type is 1 to {EVENT_TYPE_MAX_LENGTH} characters")
    return webhook_delivery_record(
        owner_id=owner_id,
        job=None,
        event_type=event_type,
        url=url,
        message_id=new_id("msg", 24),
        payload=document,
        headers=headers,
    )


def webhook_delivery_record(
    *,
    owner_id: Any,
    job: Job | None,
    event_type: str,
    url: str,
    message_id: str,
    payload: WebhookBody | EventBody | dict[str, Any],
    headers: dict[str, str] | None = None,
) -> WebhookDelivery:
    delivery = WebhookDelivery.objects.create(
        owner_id=owner_id,
        job=job,
        event_type=event_type,
        message_id=message_id,
        url=url,
        payload=payload,
        headers=headers or {},
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
    delivery = WebhookDelivery.objects.select_related("owner").get(pk=delivery_id)
    number = delivery.attempts + 1
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    timestamp = int(time.time())
    secret = webhook_secret_for(delivery.owner)
    headers = {
        **delivery.headers,
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
