"""What the model is shown: past runs, short job events, a budget."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.conversation import conversation_build
from sessions.events import event_append
from sessions.inbox import inbox_append
from sessions.llm.blocks import job_event_block, job_event_text, wire_messages
from sessions.models import Event, Run
from sessions.payloads import JobEventPayload
from sessions.runs import run_complete, run_fail, run_start
from sessions.services import message_post
from tests.sessions.factories import make_session

pytestmark = pytest.mark.django_db

DONE: JobEventPayload = {
    "event": "job_completed",
    "job_id": "job_t1",
    "tool": "run_tests",
    "status": "done",
    "summary": "412 passed, 3 failed (auth/session.py)",
    "error": None,
    "progress": {"fraction": 1.0, "message": ""},
    "partial_count": 415,
}


def test_a_completion_is_a_short_block_never_the_payload() -> None:
    assert job_event_text(DONE, compact=False) == (
        "[event] job_completed job_id=job_t1 tool=run_tests status=done\n"
        "summary: 412 passed, 3 failed (auth/session.py)\n"
        "details: get_job_result(job_t1)"
    )
    failed: JobEventPayload = {
        **DONE,
        "event": "job_failed",
        "status": "failed",
        "summary": "failed",
        "error": {"code": "tool_error", "message": "boom"},
    }
    assert "error: tool_error: boom" in job_event_text(failed, compact=False)
    assert job_event_text(DONE, compact=True) == (
        "[event] job_completed job_id=job_t1 tool=run_tests status=done"
        " — 412 passed, 3 failed (auth/session.py)"
    )


def finish_turn(session: Any, text: str, *, status: str = "completed") -> Run:
    """Run the session's queued run by hand, with a reply of ``text``."""
    run = Run.objects.get(session=session, status="queued")
    run_start(run_id=run.id)
    event_append(
        session_id=session.id, kind="assistant_message", payload={"text": text}, run_id=run.id
    )
    if status == "completed":
        run_complete(run_id=run.id, usage={})
    else:
        run_fail(run_id=run.id, code="model_error", message="x")
    return run


def build(session: Any) -> Any:
    run = Run.objects.get(session=session, status="queued")
    claim = run_start(run_id=run.id)
    assert claim is not None
    return conversation_build(session=session, run=claim.run, batch=claim.batch)


def test_history_is_rebuilt_run_by_run_and_seen_jobs_shrink(user: Any) -> None:
    session = make_session(user)
    message_post(session=session, text="run the tests")
    finish_turn(session, "Started.")
    inbox_append(session_id=session.id, kind="job_event", payload=dict(DONE))
    finish_turn(session, "The tests finished.")
    message_post(session=session, text="thanks")
    conv = build(session)
    assert conv.messages == [
        {"role": "user", "content": [{"type": "text", "text": "run the tests"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Started."}]},
        {"role": "user", "content": [job_event_block(DONE, compact=True)]},
        {"role": "assistant", "content": [{"type": "text", "text": "The tests finished."}]},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]


def test_a_job_event_the_model_never_reacted_to_stays_in_full(user: Any) -> None:
    session = make_session(user)
    inbox_append(session_id=session.id, kind="job_event", payload=dict(DONE))
    finish_turn(session, "", status="failed")
    message_post(session=session, text="so?")
    conv = build(session)
    assert conv.messages[0]["content"][0] == job_event_block(DONE, compact=False)
    assert wire_messages(conv.messages)[0]["content"][0]["text"] == job_event_text(
        DONE, compact=False
    )


def test_a_tool_call_left_without_result_is_closed(user: Any) -> None:
    session = make_session(user)
    message_post(session=session, text="read")
    run = Run.objects.get(session=session)
    run_start(run_id=run.id)
    event_append(
        session_id=session.id,
        kind="tool_call",
        run_id=run.id,
        payload={"id": "t1", "name": "read_file", "input": {"path": "a"}},
    )
    run_fail(run_id=run.id, code="worker_lost", message="gone")
    message_post(session=session, text="again")
    conv = build(session)
    assert conv.messages[1]["content"][0]["type"] == "tool_use"
    closing = conv.messages[2]["content"]
    assert closing[0]["type"] == "tool_result" and closing[0]["is_error"]
    assert closing[1] == {"type": "text", "text": "again"}


def test_long_sessions_stay_within_the_budget(user: Any, settings: Any) -> None:
    session = make_session(user)
    for i in range(30):
        message_post(session=session, text=f"message {i} " + "lorem ipsum " * 100)
        finish_turn(session, f"answer {i} " + "dolor sit " * 100)
    message_post(session=session, text="latest")
    run = Run.objects.get(session=session, status="queued")
    claim = run_start(run_id=run.id)
    assert claim is not None
    settings.AGENTSITE_CONTEXT_BUDGET_TOKENS = 8000
    conv = conversation_build(session=session, run=claim.run, batch=claim.batch)
    assert conv.tokens() <= 8000
    assert conv.omitted_runs > 0
    assert (
        conv.messages[0]["role"] == "user" and "omitted" in conv.messages[0]["content"][0]["text"]
    )
    assert conv.messages[-1]["content"][-1] == {"type": "text", "text": "latest"}
    # The newest turns are the ones kept.
    assert "answer 29" in str(conv.messages[-2])
    assert Event.objects.filter(session=session, pending=True).count() == 0
