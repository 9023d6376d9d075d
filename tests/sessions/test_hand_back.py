"""A run handed back by a stopping worker keeps its batch, its id and a truthful log."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.conversation import conversation_build
from sessions.events import event_append
from sessions.models import AgentSession, Event, Run
from sessions.runs import (
    run_complete,
    run_hand_back,
    run_request_cancel,
    run_route,
    run_start,
    runs_to_stop,
)
from tests.sessions.factories import make_session

# Not transactional: nothing commits, so no worker is handed these runs.
pytestmark = pytest.mark.django_db


def say(session: AgentSession, text: str) -> Run:
    event_append(session_id=session.id, kind="user_message", payload={"text": text}, pending=True)
    run = run_route(session_id=session.id)
    assert run is not None
    return run


def test_a_handed_back_run_takes_its_own_batch_again_and_leaves_the_next_runs_alone(
    user: Any,
) -> None:
    session = make_session(user)
    first = say(session, "one")
    claim = run_start(run_id=first.id)
    assert claim is not None and [e.payload["text"] for e in claim.batch] == ["one"]
    event_append(
        session_id=session.id,
        kind="tool_call",
        payload={"id": "t1", "name": "pause_read", "input": {}},
        run_id=first.id,
    )
    waiting = say(session, "two")
    assert waiting.id != first.id

    assert run_hand_back(run_id=first.id, reason="worker_shutdown")
    first.refresh_from_db()
    assert first.status == Run.Status.QUEUED and first.started_at is None
    requeued = Event.objects.get(run=first, kind="run_requeued").payload
    started_seq = Event.objects.get(run=first, kind="run_started").seq
    assert requeued == {
        "run_id": first.id,
        "reason": "worker_shutdown",
        "superseded_after_seq": started_seq,
    }
    # A new message goes to the newer queued run, not to the handed-back one.
    assert run_route(session_id=session.id) == waiting

    again = run_start(run_id=first.id)
    assert again is not None and [e.payload["text"] for e in again.batch] == ["one"]
    assert run_start(run_id=waiting.id) is None  # one run at a time per session
    event_append(
        session_id=session.id,
        kind="assistant_message",
        payload={"text": "Answered on the second attempt."},
        run_id=first.id,
    )
    assert run_complete(run_id=first.id, usage={})

    claim = run_start(run_id=waiting.id)
    assert claim is not None and [e.payload["text"] for e in claim.batch] == ["two"]
    history = conversation_build(session=session, run=claim.run, batch=claim.batch).messages
    assert history == [
        {"role": "user", "content": [{"type": "text", "text": "one"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Answered on the second attempt."}],
        },
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
    ]


def test_an_interrupted_run_is_not_handed_back(user: Any) -> None:
    session = make_session(user)
    run = say(session, "one")
    assert run_start(run_id=run.id) is not None
    assert run_request_cancel(run_id=run.id) == "cancelling"
    assert not run_hand_back(run_id=run.id, reason="worker_shutdown")
    assert Run.objects.get(pk=run.id).status == Run.Status.RUNNING


def test_the_watch_query_names_the_runs_to_stop(user: Any) -> None:
    session, other = make_session(user), make_session(user)
    running, asked = say(session, "one"), say(other, "two")
    for run in (running, asked):
        assert run_start(run_id=run.id) is not None
    run_request_cancel(run_id=asked.id)
    assert runs_to_stop(run_ids=[running.id, asked.id, "run_gone"]) == {asked.id, "run_gone"}
