"""Job services other than status transitions (those live in ``jobs.lifecycle``)."""

from __future__ import annotations

from django.utils import timezone

from jobs.models import Job


def idempotency_keys_expire() -> int:
    """Release Idempotency-Keys past their time to live, so they may be used again."""
    return Job.objects.filter(
        idempotency_key__isnull=False, idempotency_expires_at__lt=timezone.now()
    ).update(idempotency_key=None)
