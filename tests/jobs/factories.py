"""Small helpers shared by the job tests."""

from __future__ import annotations

import itertools
from typing import Any

from django.test import Client

from jobs.models import Job
from tests.conftest import wait_until

_keys = itertools.count(1)


def start_job(client: Client, tool: str, args: dict[str, Any] | None = None, **body: Any) -> Any:
    """POST /api/jobs with a fresh Idempotency-Key; returns the response."""
    key = body.pop("key", None) or f"key-{next(_keys)}"
    return client.post(
        "/api/jobs",
        {"tool": tool, "args": args or {}, **body},
        content_type="application/json",
        headers={"Idempotency-Key": key},
    )


def started_job_id(
    client: Client, tool: str, args: dict[str, Any] | None = None, **body: Any
) -> str:
    response = start_job(client, tool, args, **body)
    assert response.status_code == 202, response.content
    return str(response.json()["job_id"])


def wait_for_status(job_id: str, *statuses: str, timeout: float = 30) -> Job:
    return wait_until(
        lambda: Job.objects.filter(id=job_id, status__in=statuses).first(), timeout=timeout
    )
