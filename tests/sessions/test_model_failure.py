"""A model that fails mid-stream ends the run failed, with an error event; the session goes on."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.llm.scripted import scripted_push
from sessions.models import AgentSession, Event, Run
from sessions.services import message_post
from tests.sessions.factories import kinds, make_session, messages, wait_for_idle, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_model_error_mid_stream_fails_the_run_and_keeps_the_text(
    user: Any, rq_workers: Any
) -> None:
    session = make_session(user)
    scripted_push(
        session.id,
        {"text": "Let me think about th", "error": "upstream overloaded"},
        {"text": "Back again."},
    )
    _, run = message_post(session=session, text="hello")
    run = wait_for_run(run.id)

    assert run.status == Run.Status.FAILED
    assert "upstream overloaded" in run.error
    error = Event.objects.get(run=run, kind="error").payload
    assert error == {"code": "model_error", "message": "upstream overloaded"}
    assert messages(session, run) == ["Let me think about th"]
    finished = Event.objects.get(run=run, kind="run_finished").payload
    assert finished["status"] == "failed" and finished["error"]["code"] == "model_error"

    _, retry = message_post(session=session, text="again?")
    assert wait_for_run(retry.id).status == Run.Status.COMPLETED
    assert messages(session, retry) == ["Back again."]
    wait_for_idle(session)
    session.refresh_from_db()
    assert session.state == AgentSession.State.IDLE
    assert kinds(session).count("error") == 1
