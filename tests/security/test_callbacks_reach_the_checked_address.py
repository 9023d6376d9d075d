"""A job's callback goes to the address the check approved, and to nothing else.

``rebind.test`` answers a stand-in public address to the check and the internal
service's address to any later lookup (DNS rebinding); proxy variables point at
a recorder. Everything listens on loopback.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job, WebhookAttempt, WebhookDelivery
from jobs.webhooks import webhook_deliver
from tests.jobs.rebinding import (
    STAND_IN_PUBLIC,
    Rebinding,
    Recorder,
    proxy_from_environment,
    rebinding,
)

pytestmark = pytest.mark.django_db
__all__ = ["proxy_from_environment", "rebinding"]  # the fixtures, used by name


def delivery_to(url: str, owner: Any) -> WebhookDelivery:
    job = Job.objects.create(
        owner=owner, tool="noop", status=Job.Status.DONE, callback_url=url, timeout_s=60
    )
    return WebhookDelivery.objects.create(
        owner=owner,
        event_type="job_completed",
        job=job,
        message_id=f"msg_{job.id}_job_completed",
        url=url,
        payload={"type": "job_completed", "data": {"job_id": job.id}},
        next_attempt_at=job.created_at,
    )


def test_a_callback_is_posted_to_the_address_that_was_checked(
    rebinding: Rebinding, user: Any
) -> None:
    delivery = delivery_to(rebinding.url, user)

    attempt = webhook_deliver(delivery_id=delivery.pk)

    assert attempt is not None and attempt.status_code == 200, attempt and attempt.error
    assert rebinding.internal.seen == []
    [seen] = rebinding.checked.seen
    assert (seen.method, seen.path) == ("POST", "/hook")
    assert seen.headers["Host"] == f"rebind.test:{rebinding.port}"
    assert seen.headers["webhook-id"] == delivery.message_id
    assert rebinding.lookups == [STAND_IN_PUBLIC]  # resolved once, by the check


def test_a_callback_takes_no_proxy_from_the_environment(
    rebinding: Rebinding, proxy_from_environment: Recorder, user: Any
) -> None:
    delivery = delivery_to(rebinding.url, user)

    webhook_deliver(delivery_id=delivery.pk)

    assert proxy_from_environment.seen == []
    assert [seen.method for seen in rebinding.checked.seen] == ["POST"]
    assert WebhookAttempt.objects.get(delivery=delivery).ok
