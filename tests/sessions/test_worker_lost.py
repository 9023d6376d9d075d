"""A run whose worker died is failed by the periodic reaper and never wedges its session."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from sessions.events import event_append
from sessions.llm.scripted import scripted_push
from sessions.models import Event, Run
from sessions.runs import RUN_STALE_AFTER_S, run_start, runs_reap
from sessions.services import message_post
from sessions.tasks import PERIODIC, reap_runs
from tests.sessions.factories import make_session, messages, wait_for_run

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


def test_the_reaper_is_a_periodic_task(db: None) -> None:
    assert (reap_runs, "turns", 5) in PERIODIC
