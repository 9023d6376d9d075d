"""A run streams the model's reply into the log as coalesced deltas and a final message."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.llm.scripted import scripted_push, scripted_requests
from sessions.models import AgentSession, Event, Run
from sessions.services import message_post
from tests.sessions.factories import kinds, make_session, messages, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_message_gets_a_streamed_reply(user: Any, rq_workers: Any) -> None:
    session = make_session(user)
    reply = "Hello! " * 40
    scripted_push(session.id, {"text": reply, "chunk": 3})
    _, run = message_post(session=session, text="hi there")
    run = wait_for_run(run.id)

    assert run.status == Run.Status.COMPLETED
    assert messages(session) == [reply]
    deltas = Event.objects.filter(session=session, kind="assistant_delta").order_by("seq")
    assert "".join(d.payload["text"] for d in deltas) == reply
    # 94 model pieces were coalesced into far fewer rows.
    assert 1 <= deltas.count() < len(reply) // 3
    assert kinds(session) == ["user_message", "run_started", "assistant_message", "run_finished"]
    assert run.batch_size == 1 and run.first_token_at is not None and run.finished_at
    request = scripted_requests(session.id)[0]
    assert request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi there"}]}
    ]
    session.refresh_from_db()
    assert session.state == AgentSession.State.IDLE
