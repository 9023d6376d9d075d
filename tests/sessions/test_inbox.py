"""inbox_append appends a pending event and queues exactly one run per session."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.inbox import inbox_append
from sessions.models import AgentSession, Event, Run
from sessions.runs import run_complete, run_request_cancel, run_start
from sessions.services import message_post, session_create


def test_a_message_on_an_idle_session_queues_one_run(user: Any) -> None:
    session = session_create(owner=user)
    event, run = message_post(session=session, text="hello")
    assert event.pending and event.kind == "user_message"
    assert run.status == Run.Status.QUEUED
    session.refresh_from_db()
    assert session.state == AgentSession.State.RUNNING


def test_events_arriving_before_the_run_starts_join_the_queued_run(user: Any) -> None:
    session = session_create(owner=user)
    _, run = message_post(session=session, text="one")
    _, same = message_post(session=session, text="two")
    inbox_append(session_id=session.id, kind="job_event", payload={"event": "job_completed"})
    assert same.id == run.id
    assert Run.objects.filter(session=session).count() == 1
    claim = run_start(run_id=run.id)
    assert claim is not None
    assert [e.seq for e in claim.batch] == [1, 2, 3]
    assert not Event.objects.filter(session=session, pending=True).exists()


def test_events_arriving_during_a_run_queue_the_next_run(user: Any) -> None:
    session = session_create(owner=user)
    _, first = message_post(session=session, text="one")
    assert run_start(run_id=first.id) is not None
    _, second = message_post(session=session, text="two")
    assert second.id != first.id and second.status == Run.Status.QUEUED
    # The queued run cannot start while the first is running.
    assert run_start(run_id=second.id) is None
    assert run_complete(run_id=first.id, usage={})
    claim = run_start(run_id=second.id)
    assert claim is not None and [e.payload["text"] for e in claim.batch] == ["two"]
    assert run_complete(run_id=second.id, usage={})
    session.refresh_from_db()
    assert session.state == AgentSession.State.IDLE


def test_a_started_run_is_not_started_twice(user: Any) -> None:
    session = session_create(owner=user)
    _, run = message_post(session=session, text="one")
    assert run_start(run_id=run.id) is not None
    assert run_start(run_id=run.id) is None


def test_cancelling_a_queued_run_cancels_it_at_once(user: Any) -> None:
    session = session_create(owner=user)
    _, run = message_post(session=session, text="one")
    assert run_request_cancel(run_id=run.id) == "cancelled"
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    kinds = list(Event.objects.filter(session=session).values_list("kind", flat=True))
    assert kinds == ["user_message", "run_finished"]


def test_cancelling_a_running_run_asks_its_worker(user: Any) -> None:
    session = session_create(owner=user)
    _, run = message_post(session=session, text="one")
    run_start(run_id=run.id)
    assert run_request_cancel(run_id=run.id) == "cancelling"
    run.refresh_from_db()
    assert run.cancel_requested_at is not None and run.status == Run.Status.RUNNING


def test_cancelling_the_queued_run_behind_a_running_one_keeps_the_session_running(
    user: Any,
) -> None:
    session = session_create(owner=user)
    _, first = message_post(session=session, text="one")
    run_start(run_id=first.id)
    _, second = message_post(session=session, text="two")
    assert run_request_cancel(run_id=second.id) == "cancelled"
    session.refresh_from_db()
    assert session.state == AgentSession.State.RUNNING
    # The message the cancelled run would have taken waits for the next run.
    assert Event.objects.get(session=session, pending=True).payload == {"text": "two"}
    run_complete(run_id=first.id, usage={})
    _, third = message_post(session=session, text="three")
    claim = run_start(run_id=third.id)
    assert claim is not None and [e.payload["text"] for e in claim.batch] == ["two", "three"]


def test_a_deleted_session_takes_no_messages(user: Any) -> None:
    from sessions.services import SessionNotFound, session_delete

    session = session_create(owner=user)
    session_delete(session=session)
    with pytest.raises(SessionNotFound):
        message_post(session=session, text="anyone?")
    assert not Event.objects.filter(session=session).exists()
