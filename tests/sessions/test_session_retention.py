"""Sessions their owner deleted are deleted for good after AGENTSITE_SESSION_RETENTION_DAYS."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Job
from responses.models import AgentResponse
from sessions.models import AgentSession, Event, Run
from sessions.retention import sessions_purge
from sessions.services import session_create, session_delete
from sessions.tasks import PERIODIC, purge_sessions

pytestmark = pytest.mark.django_db


def session_with_history(owner: Any, *, events: int = 4) -> AgentSession:
    session = session_create(owner=owner, title="history")
    run = Run.objects.create(session=session, owner=owner, status=Run.Status.COMPLETED)
    Event.objects.bulk_create(
        Event(session=session, seq=seq, kind=Event.Kind.USER_MESSAGE, payload={}, run=run)
        for seq in range(1, events + 1)
    )
    AgentResponse.objects.create(owner=owner, session=session, input_seq=1, model="offline")
    return session


def deleted(session: AgentSession, *, days_ago: float) -> AgentSession:
    session_delete(session=session)
    at = timezone.now() - timedelta(days=days_ago)
    AgentSession.objects.filter(pk=session.pk).update(deleted_at=at)
    return session


def exists(session: AgentSession) -> bool:
    return AgentSession.objects.filter(pk=session.pk).exists()


def test_sessions_deleted_past_retention_go_with_their_events_runs_and_responses(
    user: Any,
) -> None:
    old = deleted(session_with_history(user), days_ago=31)
    recent = deleted(session_with_history(user), days_ago=29)
    live = session_with_history(user)
    AgentSession.objects.filter(pk=live.pk).update(created_at=timezone.now() - timedelta(days=400))
    finished = Job.objects.create(
        owner=user, session=old, run=old.runs.get(), tool="now", timeout_s=5, status="done"
    )

    assert sessions_purge() == 1

    assert not exists(old) and exists(recent) and exists(live)
    assert not Event.objects.filter(session_id=old.id).exists()
    assert not Run.objects.filter(session_id=old.id).exists()
    assert not AgentResponse.objects.filter(session_id=old.id).exists()
    assert Event.objects.filter(session_id=recent.id).count() == 4
    # A job outlives its session (the jobs' own retention decides when it goes).
    finished.refresh_from_db()
    assert (finished.session_id, finished.run_id) == (None, None)


def test_a_deleted_session_still_in_use_stays(user: Any) -> None:
    turning = deleted(session_with_history(user), days_ago=60)
    Run.objects.create(session=turning, owner=user, status=Run.Status.RUNNING)
    working = deleted(session_with_history(user), days_ago=60)
    Job.objects.create(owner=user, session=working, tool="now", timeout_s=5, status="running")

    assert sessions_purge() == 0
    assert exists(turning) and exists(working)


def test_a_pass_deletes_a_bounded_number_of_rows_and_leaves_the_rest_for_the_next(
    user: Any, settings: Any
) -> None:
    settings.AGENTSITE_RETENTION_BATCH, settings.AGENTSITE_RETENTION_BATCHES = 2, 3
    sessions = [deleted(session_with_history(user, events=5), days_ago=40) for _ in range(2)]

    assert sessions_purge() == 0
    assert Event.objects.count() == 10 - 6

    passes = 1
    while AgentSession.objects.exists():
        sessions_purge()
        passes += 1
        assert passes < 20
    assert not any(exists(s) for s in sessions)
    assert not Event.objects.exists() and not Run.objects.exists()


def test_the_retention_setting_decides_what_is_old(user: Any, settings: Any) -> None:
    settings.AGENTSITE_SESSION_RETENTION_DAYS = 0
    forever = deleted(session_with_history(user), days_ago=4000)
    assert sessions_purge() == 0
    settings.AGENTSITE_SESSION_RETENTION_DAYS = 2
    kept = deleted(session_with_history(user), days_ago=1)
    assert sessions_purge() == 1
    assert exists(kept) and not exists(forever)


def test_the_scheduler_runs_the_session_retention_pass() -> None:
    assert (purge_sessions, 60) in PERIODIC
