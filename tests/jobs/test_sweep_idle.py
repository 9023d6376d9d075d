"""The job sweep of an idle server: what it costs every ``AGENTSITE_JOB_SWEEP_S``.

With no job queued or running, the passes over live jobs have nothing to find: one
look says so, and neither they nor the dispatch (which would read the tool workers'
registry in Redis) run. A queued job brings them back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from jobs import dispatch, services
from jobs.models import Job
from jobs.tasks import jobs_sweep

# Alone with its jobs: no scheduler's sweep may hand them over meanwhile.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_scheduler")]

# The look for live jobs, the webhook retries due, the idempotency keys expired.
IDLE_STATEMENTS = 3


class Statements(list[str]):
    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        self.append(sql)
        return execute(sql, params, many, context)


@pytest.fixture
def registry_looks(monkeypatch: Any) -> list[int]:
    """Each read of the tool workers' registry (``dispatch.slots_total``), counted."""
    looks: list[int] = []
    real = dispatch.slots_total

    def counted() -> int:
        slots = real()
        looks.append(slots)
        return slots

    monkeypatch.setattr(dispatch, "slots_total", counted)
    return looks


def test_an_idle_sweep_is_three_statements_and_no_look_at_the_tool_workers(
    registry_looks: list[int],
) -> None:
    statements = Statements()
    with connection.execute_wrapper(statements):
        outcome = jobs_sweep()
    assert set(outcome.values()) == {0}
    assert len(statements) == IDLE_STATEMENTS, "\n".join(statements)
    assert registry_looks == []


def test_a_queued_job_brings_the_live_passes_and_the_dispatch_back(
    user: Any, registry_looks: list[int], settings: Any
) -> None:
    settings.AGENTSITE_JOB_SLOTS = 1
    job, _ = services.job_create(owner=user, tool="noop", args={}, idempotency_key="sweep-1")
    assert dispatch.held().filter(pk=job.pk).exists()  # nothing committed: held, not handed
    statements = Statements()
    with connection.execute_wrapper(statements):
        outcome = jobs_sweep()
    assert outcome["dispatched"] == 1 and len(registry_looks) == 1
    assert len(statements) > IDLE_STATEMENTS
    assert Job.objects.get(pk=job.pk).enqueued_at is not None
