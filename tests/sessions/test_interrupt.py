"""Interrupting a run: it ends cancelled, keeps its text, and pending events wait."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.llm.scripted import scripted_push, scripted_requests
from sessions.models import AgentSession, Event, Run
from sessions.runs import run_request_cancel
from sessions.services import message_post
from tests.conftest import wait_until
from tests.sessions.factories import kinds, make_session, messages, wait_for_idle, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "".join(f"word{i} " for i in range(400))


def test_an_interrupted_run_keeps_its_text_and_the_next_run_takes_what_waited(
    user: Any, rq_workers: Any
) -> None:
    session = make_session(user)
    scripted_push(session.id, {"text": LONG, "chunk": 6, "delay_s": 0.05}, {"text": "Next."})
    _, run = message_post(session=session, text="talk for a long time")
    wait_until(lambda: Event.objects.filter(run=run, kind="assistant_delta").exists())
    _, waiting = message_post(session=session, text="meanwhile, this")
    assert waiting.id != run.id

    assert run_request_cancel(run_id=run.id) == "cancelling"
    run = wait_for_run(run.id)
    assert run.status == Run.Status.CANCELLED

    kept = Event.objects.get(run=run, kind="assistant_message").payload
    assert kept["interrupted"] is True
    assert kept["text"] and LONG.startswith(kept["text"]) and kept["text"] != LONG
    deltas = "".join(
        e.payload["text"] for e in Event.objects.filter(run=run, kind="assistant_delta")
    )
    assert deltas == kept["text"]
    assert Event.objects.get(run=run, kind="run_finished").payload["status"] == "cancelled"

    waiting = wait_for_run(waiting.id)
    assert waiting.status == Run.Status.COMPLETED and waiting.batch_size == 1
    assert messages(session, waiting) == ["Next."]
    # The next run showed the model the interrupted text as history.
    history = scripted_requests(session.id)[1]["messages"]
    assert history[1] == {"role": "assistant", "content": [{"type": "text", "text": kept["text"]}]}
    wait_for_idle(session)
    session.refresh_from_db()
    assert session.state == AgentSession.State.IDLE


def test_cancelling_a_finished_run_reports_its_real_status(user: Any, rq_workers: Any) -> None:
    session = make_session(user)
    scripted_push(session.id, {"text": "done"})
    _, run = message_post(session=session, text="hi")
    wait_for_run(run.id)
    assert run_request_cancel(run_id=run.id) == "completed"
    assert kinds(session)[-1] == "run_finished"
