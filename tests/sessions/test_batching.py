"""Events that arrive while a run is busy are taken together by the next run."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.inbox import inbox_append
from sessions.llm.scripted import scripted_open, scripted_push, scripted_requests
from sessions.models import Event, Run
from sessions.services import message_post
from tests.conftest import wait_until
from tests.sessions.factories import make_session, wait_for_idle

pytestmark = pytest.mark.django_db(transaction=True)


def test_events_arriving_during_a_run_become_one_batch(user: Any, rq_workers: Any) -> None:
    session = make_session(user)
    scripted_push(session.id, {"text": "Working on it.", "gate": "hold"}, {"text": "All noted."})
    _, first = message_post(session=session, text="first")
    wait_until(lambda: Run.objects.get(pk=first.id).status == Run.Status.RUNNING)

    _, second = message_post(session=session, text="second")
    completion = {
        "event": "job_completed",
        "job_id": "job_abc123",
        "tool": "run_tests",
        "status": "done",
        "summary": "28 passed, 2 failed",
        "error": None,
    }
    inbox_append(session_id=session.id, kind="job_event", payload=completion)
    _, third = message_post(session=session, text="third")
    assert second.id == third.id != first.id
    scripted_open(session.id, "hold")
    wait_for_idle(session)

    second.refresh_from_db()
    assert (second.status, second.batch_size) == (Run.Status.COMPLETED, 3)
    assert Run.objects.filter(session=session).count() == 2
    batch = Event.objects.filter(consumed_by=second).order_by("seq")
    assert [e.kind for e in batch] == ["user_message", "job_event", "user_message"]

    sent = scripted_requests(session.id)[1]["messages"][-1]["content"]
    assert [b["type"] for b in sent] == ["text", "text", "text"]
    assert sent[0]["text"] == "second" and sent[2]["text"] == "third"
    assert sent[1]["text"] == (
        "[event] job_completed job_id=job_abc123 tool=run_tests status=done\n"
        "summary: 28 passed, 2 failed\n"
        "details: get_job_result(job_abc123)"
    )
