"""Duration histograms come from the rows' timestamps: the same counts in every process."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from agentsite.core.database import through_database_outage
from agentsite.ops.metrics import DURATIONS, DurationHistogram
from jobs.models import Job
from tests.agentsite.ops.scrape import samples_of, value
from tests.conftest import api_client_for

JOB_DURATIONS = DURATIONS[0]


def finished_job(owner: Any, *, seconds: float, ago: timedelta) -> Job:
    finished = timezone.now() - ago
    return Job.objects.create(
        owner=owner,
        tool="noop",
        timeout_s=60,
        status=Job.Status.DONE,
        started_at=finished - timedelta(seconds=seconds),
        finished_at=finished,
    )


@pytest.mark.django_db
def test_settled_and_recent_jobs_add_up_alike_in_every_process(user: Any) -> None:
    finished_job(user, seconds=0.2, ago=timedelta(hours=2))  # long settled
    finished_job(user, seconds=3.0, ago=timedelta(seconds=1))  # still recent
    running = DurationHistogram(JOB_DURATIONS)
    first = running.tally(timezone.now())

    finished_job(user, seconds=30.0, ago=timedelta(seconds=0))
    # Later scrapes: a process that counted before, and one that starts now.
    later = timezone.now() + timedelta(hours=1)
    seen = running.tally(later)
    fresh = DurationHistogram(JOB_DURATIONS).tally(later)

    key = ("noop", "done")
    assert first[key][-2:] == [2.0, pytest.approx(3.2, abs=1e-3)]
    assert seen == fresh
    assert seen[key][-2:] == [3.0, pytest.approx(33.2, abs=1e-3)]
    bounds = JOB_DURATIONS.buckets
    assert seen[key][bounds.index(0.25)] == 1
    assert seen[key][bounds.index(5.0)] == 2
    assert seen[key][bounds.index(60.0)] == 3


@pytest.mark.django_db(transaction=True)
def test_a_database_reconnect_is_counted(make_user: Any) -> None:
    operator = api_client_for(make_user("operator", is_staff=True))

    def reconnects(client: Client) -> float:
        samples = samples_of(client.get("/metrics").content.decode())
        return value(samples, "agentsite_reconnects_total", store="database") or 0.0

    before = reconnects(operator)
    calls: list[int] = []

    def query_once_broken() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return Job.objects.count()

    assert through_database_outage(query_once_broken, what="a test query") == 0
    assert reconnects(operator) == before + 1
