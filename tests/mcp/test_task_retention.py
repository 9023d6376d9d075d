"""A task's ttl is the jobs' real retention; a task past it is not found, and says why."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import anyio
import pytest
from django.utils import timezone
from mcp.shared.exceptions import MCPError

from jobs.mcp.mapping import create_task_result, legacy_task_doc, task_doc
from jobs.models import Job
from jobs.retention import jobs_purge
from tests.mcp.client import TasksExtension, connect, get_task

pytestmark = pytest.mark.django_db(transaction=True)

DAY_MS = 24 * 3600 * 1000


def finished_job(owner: Any, *, days_ago: float = 0) -> Job:
    at = timezone.now() - timedelta(days=days_ago)
    return Job.objects.create(
        owner=owner, tool="now", timeout_s=5, status="done", result={}, finished_at=at
    )


def test_the_ttl_of_a_task_is_the_retention_setting(user: Any, settings: Any) -> None:
    settings.AGENTSITE_JOB_RETENTION_DAYS = 3
    job = finished_job(user)
    assert task_doc(job)["ttlMs"] == create_task_result(job)["ttlMs"] == 3 * DAY_MS
    assert legacy_task_doc(job)["ttl"] == 3 * DAY_MS
    settings.AGENTSITE_JOB_RETENTION_DAYS = 0  # kept forever: the spec's null
    assert task_doc(job)["ttlMs"] is None and legacy_task_doc(job)["ttl"] is None


def test_the_server_reports_its_retention_and_a_deleted_task_is_not_found(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)
    kept, old = finished_job(user, days_ago=1), finished_job(user, days_ago=31)
    assert jobs_purge() == 1

    async def scenario() -> tuple[dict[str, Any], MCPError]:
        async with connect(mcp_url, token, extensions=[TasksExtension()]) as client:
            task = await get_task(client.session, kept.id)
            with pytest.raises(MCPError) as caught:
                await get_task(client.session, old.id)
            return task, caught.value

    task, error = anyio.run(scenario)
    assert task["ttlMs"] == 30 * DAY_MS
    assert error.error.code == -32602
    assert error.error.message == (
        "Failed to retrieve task: Task not found. Finished jobs are kept 30 days, then deleted."
    )
    assert error.error.data == {
        "code": "not_found",
        "message": "No such job. Finished jobs are kept 30 days, then deleted.",
    }
