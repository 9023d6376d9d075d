"""Channel-layer group names for live job updates."""

from __future__ import annotations

from django.conf import settings


def owner_jobs_group(owner_id: int) -> str:
    """Everyone watching all the jobs of one user."""
    return f"{settings.REDIS_PREFIX}.jobs.owner.{owner_id}"


def cancel_key(job_id: str) -> str:
    """The Redis key whose presence tells a running job to stop."""
    return f"{settings.REDIS_PREFIX}:cancel:{job_id}"
