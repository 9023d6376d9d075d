"""A request for a report on the tests starts the test run and a report that waits for it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs.models import Job
from sessions.llm.blocks import job_event_block
from sessions.llm.offline import plan_reply
from sessions.models import Run
from sessions.payloads import JobEventPayload
from sessions.toolbox import tool_definitions, tool_execute
from tests.sessions.factories import make_session

pytestmark = pytest.mark.django_db

REPORT_ON_TESTS = [
    "Please run the tests in the workspace and write a report on them.",
    "run the test suite and give me a report",
    "Write me a report on the tests",
]


def asked(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def answered(
    messages: list[dict[str, Any]], job_ids: list[str]
) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    """One model call, its tool calls answered with the given job ids, as the loop does."""
    plan = plan_reply(messages, tool_definitions())
    uses = [
        {"type": "tool_use", "id": f"call_{len(messages)}_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(plan.calls)
    ]
    results = [
        {
            "type": "tool_result",
            "tool_use_id": use["id"],
            "content": json.dumps({"job_id": job_id, "status": "queued"}),
        }
        for use, job_id in zip(uses, job_ids, strict=True)
    ]
    said: list[dict[str, Any]] = [{"type": "text", "text": " ".join(plan.text)}]
    assistant = {"role": "assistant", "content": said + uses}
    after = [assistant, {"role": "user", "content": results}] if uses else [assistant]
    return [*messages, *after], plan.calls


@pytest.mark.parametrize("text", REPORT_ON_TESTS)
def test_a_report_on_the_tests_runs_them_then_writes_the_report_after_them(text: str) -> None:
    messages, first = answered([asked(text)], ["job_tests1"])
    assert first == [("start_run_tests", {})]

    messages, second = answered(messages, ["job_report1"])
    assert second == [
        (
            "start_write_report",
            {
                "topic": "the tests" if text.startswith("Write me") else "the test run",
                "source_job_ids": ["job_tests1"],
                "depends_on": ["job_tests1"],
            },
        )
    ]

    final = plan_reply(messages, tool_definitions())
    assert final.calls == []
    said = " ".join(final.text)
    assert "job_report1" in said and "waits for job_tests1" in said
    assert "read and download" in said


def test_running_the_tests_alone_starts_no_report() -> None:
    messages, first = answered([asked("run the tests")], ["job_tests2"])
    assert first == [("start_run_tests", {})]
    final = plan_reply(messages, tool_definitions())
    assert final.calls == []
    assert final.text[0].startswith("Started run_tests as job_tests2.")


def test_a_report_on_tests_that_already_ran_reports_on_that_run() -> None:
    messages, _ = answered([asked("run the tests")], ["job_tests3"])
    payload: JobEventPayload = {
        "event": "job_completed",
        "job_id": "job_tests3",
        "tool": "run_tests",
        "status": "done",
        "progress": {"fraction": None, "message": ""},
        "summary": "31 passed, 2 failed",
        "error": None,
        "partial_count": 0,
    }
    done = {"role": "user", "content": [job_event_block(payload, compact=False)]}
    messages = [*plan_messages(messages), done, {"role": "assistant", "content": "ok"}]
    _, calls = answered([*messages, asked("Write me a report on the tests")], ["job_report3"])
    assert calls == [
        ("start_write_report", {"topic": "the tests", "source_job_ids": ["job_tests3"]})
    ]


def plan_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Close the turn the way the model would: one explaining call."""
    plan = plan_reply(messages, tool_definitions())
    return [*messages, {"role": "assistant", "content": [{"type": "text", "text": plan.text[0]}]}]


def test_a_started_tool_takes_depends_on_beside_its_own_arguments(user: Any) -> None:
    session = make_session(user)
    run = Run.objects.create(session=session, owner=user)
    common = {"owner": user, "session_id": session.id, "run_id": run.id}
    tests, failed = tool_execute(name="start_run_tests", args={}, call_id="c1", **common)
    assert not failed
    report, failed = tool_execute(
        name="start_write_report",
        args={
            "topic": "the tests",
            "source_job_ids": [tests["job_id"]],
            "depends_on": [tests["job_id"]],
        },
        call_id="c2",
        **common,
    )
    assert not failed, report
    job = Job.objects.get(id=report["job_id"])
    assert job.dependency_ids == [tests["job_id"]]
    assert "depends_on" not in job.args and job.args["source_job_ids"] == [tests["job_id"]]
    assert job.ready_at is None  # held until the test run is done
