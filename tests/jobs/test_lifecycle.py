"""jobs.lifecycle: transitions return the stored row; each publishes in its own transaction."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from jobs import hooks, lifecycle, services
from jobs.lifecycle import JobTransitionError
from jobs.models import Job, JobEvent
from sessions.models import AgentSession, Event, Run

pytestmark = pytest.mark.django_db


def stored(job: Job) -> dict[str, Any]:
    return {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}


@pytest.mark.parametrize("returning", [True, False], ids=["returning", "read-back"])
def test_transitions_return_the_stored_row(user: Any, monkeypatch: Any, returning: bool) -> None:
    if returning:
        assert lifecycle._returns_from_update(connection)  # both supported backends do
    else:
        monkeypatch.setattr(lifecycle, "_returns_from_update", lambda connection: False)
    job, created = services.job_create(owner=user, tool="noop", args={}, idempotency_key="k1")
    assert created

    started = lifecycle.job_start(job_id=job.id, worker_name="w1", timeout_s=30)
    assert started.status == Job.Status.RUNNING and started.worker_name == "w1"
    assert started.started_at is not None and started.deadline is not None
    assert started.deadline - started.started_at == timedelta(seconds=30)
    assert stored(started) == stored(Job.objects.get(id=job.id))

    lifecycle.job_partial(job_id=job.id, index=0, item={"n": 0})
    done = lifecycle.job_succeed(job_id=job.id, result={"rows": [1, 2]})
    assert done.status == Job.Status.DONE and done.result == {"rows": [1, 2]}
    assert done.partial_count == 1 and done.progress_fraction == 1.0
    assert stored(done) == stored(Job.objects.get(id=job.id))

    with pytest.raises(JobTransitionError) as refused:
        lifecycle.job_cancel(job_id=job.id)
    assert refused.value.current == Job.Status.DONE


def test_a_dependency_knows_it_has_dependents(user: Any) -> None:
    first, _ = services.job_create(owner=user, tool="noop", args={}, idempotency_key="a")
    second, _ = services.job_create(
        owner=user, tool="noop", args={}, idempotency_key="b", depends_on=[first.id]
    )
    rows = {j.id: j for j in Job.objects.all()}
    assert rows[first.id].has_dependents and not rows[second.id].has_dependents
    assert rows[second.id].dependency_ids == [first.id]
    assert rows[second.id].ready_at is None and rows[first.id].ready_at is not None


class RolledBack(Exception):
    pass


def job_in_session(user: Any) -> tuple[Job, AgentSession]:
    session = AgentSession.objects.create(owner=user)
    job, _ = services.job_create(
        owner=user, tool="sleepy", args={}, idempotency_key="s1", session_id=session.id
    )
    return job, session


def final_events(session: AgentSession) -> list[Event]:
    return list(Event.objects.filter(session=session, payload__event="job_cancelled"))


def test_a_final_event_reaches_the_session_inbox_in_the_jobs_own_transaction(user: Any) -> None:
    job, session = job_in_session(user)

    with pytest.raises(RolledBack), transaction.atomic():
        lifecycle.job_cancel(job_id=job.id)
        [event] = final_events(session)
        assert event.pending and event.kind == Event.Kind.JOB_EVENT
        assert Run.objects.filter(session=session).exists()  # the inbox woke the router
        raise RolledBack  # the job's transaction does not commit

    assert Job.objects.get(id=job.id).status == Job.Status.QUEUED
    assert final_events(session) == []
    assert not Run.objects.filter(session=session).exists()

    lifecycle.job_cancel(job_id=job.id)
    assert [e.pending for e in final_events(session)] == [True]


def test_a_session_that_refuses_the_event_never_costs_the_job_its_state(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, session = job_in_session(user)

    def refuse(*, session_id: str, payload: Any) -> None:
        Event.objects.create(session_id=session_id, seq=99, kind="job_event", payload={})
        raise RuntimeError("the session cannot take it")

    monkeypatch.setattr(hooks, "_registered", hooks.Hooks(session_event=refuse))
    lifecycle.job_cancel(job_id=job.id)

    assert Job.objects.get(id=job.id).status == Job.Status.CANCELLED
    assert not Event.objects.filter(session=session, seq=99).exists()  # its savepoint rolled back


def test_without_sessions_a_job_publishes_only_its_own_events(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, session = job_in_session(user)
    monkeypatch.setattr(hooks, "_registered", hooks.Hooks())

    lifecycle.job_cancel(job_id=job.id)

    assert list(JobEvent.objects.filter(job=job).values_list("event", flat=True)) == [
        "job_queued",
        "job_cancelled",
    ]
    assert final_events(session) == []
