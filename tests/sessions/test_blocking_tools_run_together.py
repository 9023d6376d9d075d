"""Blocking tools of one response run together; one failure never sinks the others."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.llm.scripted import scripted_push, scripted_requests
from sessions.models import Event, Run
from sessions.services import message_post
from tests.sessions.factories import make_session, messages, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_gathered_tools_overlap_and_errors_stay_with_their_tool(user: Any, rq_workers: Any) -> None:
    session = make_session(user)
    calls = [
        {"id": "a", "name": "pause_read", "input": {"seconds": 0.5}},
        {"id": "b", "name": "broken_read", "input": {"seconds": 0.1}},
        {"id": "c", "name": "pause_read", "input": {"seconds": 0.5}},
        {"id": "d", "name": "no_such_tool", "input": {}},
    ]
    scripted_push(session.id, {"text": "Looking.", "tool_calls": calls}, {"text": "Done."})
    _, run = message_post(session=session, text="read things")
    run = wait_for_run(run.id)
    assert run.status == Run.Status.COMPLETED
    assert messages(session, run) == ["Looking.", "Done."]

    results = {
        e.payload["tool_call_id"]: e.payload
        for e in Event.objects.filter(run=run, kind="tool_result")
    }
    assert sorted(results) == ["a", "b", "c", "d"]
    assert not results["a"]["is_error"] and not results["c"]["is_error"]
    assert results["b"]["is_error"]
    assert results["b"]["output"]["error"]["code"] == "tool_error"
    assert "the disk is on fire" in results["b"]["output"]["error"]["message"]
    assert results["d"]["is_error"] and results["d"]["output"]["error"]["code"] == "unknown_tool"
    a, c = results["a"]["output"], results["c"]["output"]
    assert a["started"] < c["ended"] and c["started"] < a["ended"], "the reads did not overlap"

    followup = scripted_requests(session.id)[1]["messages"]
    assert [b["type"] for b in followup[-2]["content"]] == ["text", *["tool_use"] * 4]
    sent = followup[-1]["content"]
    assert [b["tool_use_id"] for b in sent] == ["a", "b", "c", "d"]
    assert [b["is_error"] for b in sent] == [False, True, False, True]
