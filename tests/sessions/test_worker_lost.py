"""A run whose worker died is failed by the periodic reaper and never wedges its session;
one whose worker is only cut off from the database is not."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, cast

import pytest
from django.utils import timezone

from sessions.events import event_append
from sessions.llm.scripted import scripted_push
from sessions.loop import Turn
from sessions.models import Event, Run
from sessions.runs import HEARTBEAT_EVERY_S, RUN_STALE_AFTER_S, run_start, runs_reap
from sessions.runtime import TurnRuntime, TurnThread
from sessions.services import message_post
from sessions.tasks import PERIODIC, reap_runs
from tests.agentsite.test_database import database_away_for
from tests.conftest import python_elsewhere, subprocess_env
from tests.sessions.factories import make_session, messages, wait_for_run

# The scheduler's reaper, run in a process that reaches the database.
REAP = "from sessions.runs import runs_reap; print(runs_reap()['failed'])"

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stale_run_fails_and_the_queued_one_runs(user: Any, rq_workers: Any) -> None:
    session = make_session(user)
    scripted_push(session.id, {"text": "Picked up."})
    # A run that a worker claimed and then died with: claimed here, never handed to RQ.
    event_append(session_id=session.id, kind="user_message", payload={"text": "1"}, pending=True)
    lost = Run.objects.create(session=session, owner=user)
    assert run_start(run_id=lost.id) is not None
    _, queued = message_post(session=session, text="second")
    stale = timezone.now() - timedelta(seconds=RUN_STALE_AFTER_S + 1)
    Run.objects.filter(pk=lost.id).update(heartbeat_at=stale)

    assert runs_reap() == {"failed": 1, "requeued": 0}
    lost.refresh_from_db()
    assert lost.status == Run.Status.FAILED
    assert Event.objects.get(run=lost, kind="error").payload["code"] == "worker_lost"
    assert wait_for_run(queued.id).status == Run.Status.COMPLETED
    assert messages(session, queued) == ["Picked up."]


def test_a_turn_cut_off_from_the_database_is_not_reaped_while_it_lives(
    user: Any, no_scheduler: None
) -> None:
    """A failover: the turn worker cannot reach the database, the scheduler (on the
    promoted standby) can, and finds the turn's last heartbeat long past."""
    session = make_session(user)
    run = Run.objects.create(session=session, owner=user, status=Run.Status.RUNNING)
    stale = timezone.now() - timedelta(seconds=RUN_STALE_AFTER_S + 5)
    Run.objects.filter(pk=run.id).update(heartbeat_at=stale)
    scheduler = subprocess_env()
    runtime = TurnRuntime(db_threads=1, tool_threads=1)
    runtime.turns[run.id] = cast(Turn, None)  # what the watch beats: the runs it executes
    worker = TurnThread(runtime)
    with database_away_for(60):
        worker.start()
        try:
            time.sleep(HEARTBEAT_EVERY_S + 1)  # its beats wait for the database
            # Before: failed as worker_lost, its turn still running.
            assert python_elsewhere(REAP, scheduler) == "0"
        finally:
            runtime.turns.clear()
            worker.close()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_the_reaper_is_a_periodic_task(db: None) -> None:
    assert (reap_runs, 5) in PERIODIC
