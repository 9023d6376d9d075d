"""The offline model plans real tool calls from plain phrases, deterministically."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from sessions.llm import Finish, TextDelta, ToolUse, get_model_client
from sessions.llm.blocks import job_event_block
from sessions.llm.offline import HELP, plan_reply
from sessions.payloads import JobError, JobEventPayload
from sessions.toolbox import tool_definitions

pytestmark = pytest.mark.django_db


def user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


def job_event(
    job_id: str,
    tool: str,
    *,
    event: str = "job_completed",
    status: str = "done",
    summary: str = "",
    error: JobError | None = None,
    compact: bool = False,
) -> dict[str, Any]:
    """A job event as the conversation shows it (``sessions.conversation``)."""
    payload: JobEventPayload = {
        "event": event,
        "job_id": job_id,
        "tool": tool,
        "status": status,
        "progress": {"fraction": None, "message": ""},
        "summary": summary,
        "error": error,
        "partial_count": 0,
    }
    return job_event_block(payload, compact=compact)


def events(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def started(job_id: str, tool: str = "run_tests", call_id: str = "c1") -> list[dict[str, Any]]:
    """History in which the model started a job."""
    return [
        user("go"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": f"start_{tool}", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": json.dumps({"job_id": job_id, "status": "queued"}),
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Started."}]},
    ]


def calls(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return plan_reply(messages, tool_definitions()).calls


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Please run the tests", [("start_run_tests", {})]),
        ("crawl example.com", [("start_crawl_site", {"url": "https://example.com"})]),
        (
            "Crawl https://docs.example.org/guide.",
            [("start_crawl_site", {"url": "https://docs.example.org/guide"})],
        ),
        (
            "write a report on checkout reliability",
            [("start_write_report", {"topic": "checkout reliability"})],
        ),
    ],
)
def test_phrases_start_jobs(text: str, expected: list[Any]) -> None:
    assert calls([user(text)]) == expected


def test_a_report_is_written_from_earlier_finished_jobs() -> None:
    history = [
        *started("job_aaa"),
        events(job_event("job_aaa", "run_tests", summary="3 passed")),
        {"role": "assistant", "content": [{"type": "text", "text": "The tests finished."}]},
    ]
    assert calls([*history, user("write a report about the release")]) == [
        ("start_write_report", {"topic": "the release", "source_job_ids": ["job_aaa"]})
    ]


def test_status_and_stop_target_the_running_job() -> None:
    history = started("job_run1")
    assert calls([*history, user("how is it going?")]) == [
        ("get_job_status", {"job_id": "job_run1"})
    ]
    assert calls([*history, user("status")]) == [("get_job_status", {"job_id": "job_run1"})]
    assert calls([*history, user("stop it")]) == [("stop_job", {"job_id": "job_run1"})]
    assert calls([*history, user("cancel job_other")]) == [("stop_job", {"job_id": "job_other"})]


def test_nothing_to_stop_is_said_plainly() -> None:
    plan = plan_reply([user("stop")], tool_definitions())
    assert plan.calls == [] and plan.text == ["Nothing is running, so there is nothing to stop."]


def test_questions_about_a_finished_job_read_its_result() -> None:
    history = [
        *started("job_done1"),
        events(job_event("job_done1", "run_tests", summary="1 failed", compact=True)),
    ]
    assert calls([*history, user("which tests failed?")]) == [
        ("get_job_result", {"job_id": "job_done1"})
    ]


def test_job_events_in_a_batch_are_reported() -> None:
    batch = events(
        job_event("job_t", "run_tests", summary="28 passed, 2 failed (tests/test_orders.py)"),
        job_event(
            "job_c",
            "crawl_site",
            event="job_failed",
            status="failed",
            summary="failed",
            error={"code": "fetch_failed", "message": "connection refused"},
        ),
    )
    plan = plan_reply([batch], tool_definitions())
    assert plan.calls == []
    assert plan.text == [
        "The tests finished: 28 passed, 2 failed (tests/test_orders.py).",
        "The crawl_site job job_c failed: fetch_failed: connection refused.",
    ]


def test_anything_else_gets_help() -> None:
    assert plan_reply([user("hello there")], tool_definitions()).text == [HELP]


def test_tool_results_are_explained() -> None:
    history = started("job_x1")
    plan = plan_reply(history[:3], tool_definitions())
    assert plan.text[0].startswith("Started run_tests as job_x1.")


def test_it_streams_small_pieces_and_the_same_reply_every_time() -> None:
    async def collect() -> list[Any]:
        model = get_model_client("offline")
        return [item async for item in model.stream(system="", messages=[user("hello")], tools=[])]

    first, second = asyncio.run(collect()), asyncio.run(collect())
    assert first == second
    deltas = [i for i in first if isinstance(i, TextDelta)]
    assert len(deltas) > 10 and "".join(d.text for d in deltas) == HELP
    assert isinstance(first[-1], Finish) and first[-1].stop_reason == "end_turn"
    assert not any(isinstance(i, ToolUse) for i in first)


def test_new_input_after_closed_tool_results_is_answered() -> None:
    closed = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c9", "content": "No result", "is_error": True},
            {"type": "text", "text": "run the tests"},
        ],
    }
    assert calls([closed]) == [("start_run_tests", {})]
