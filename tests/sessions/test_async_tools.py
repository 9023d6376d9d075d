"""start_<tool> starts a job and returns at once; job tools see and steer it."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from sessions.llm.scripted import scripted_push, scripted_requests
from sessions.models import Event, Run
from sessions.services import message_post
from sessions.toolbox import job_idempotency_key, tool_definitions, tool_execute
from tests.conftest import wait_until
from tests.sessions.factories import make_session, wait_for_idle, wait_for_run
from tests.sessions.tools_for_tests import gate_open


def results_of(run: Run) -> dict[str, Any]:
    return {
        e.payload["tool_call_id"]: e.payload
        for e in Event.objects.filter(run=run, kind="tool_result")
    }


@pytest.mark.django_db
def test_the_model_sees_start_tools_and_the_shared_job_tools() -> None:
    tools = {t["name"]: t for t in tool_definitions()}
    assert "start_gated" in tools and "gated" not in tools
    assert "pause_read" in tools and "start_pause_read" not in tools
    assert {"get_job_status", "stop_job", "get_job_result"} <= set(tools)
    description = tools["start_gated"]["description"]
    assert "returns immediately" in description and "job_completed" in description
    assert "Do not wait" in description


@pytest.mark.django_db
def test_a_retried_tool_call_starts_no_second_job(user: Any) -> None:
    session = make_session(user)
    run = Run.objects.create(session=session, owner=user)
    kwargs = {"owner": user, "session_id": session.id, "run_id": run.id, "call_id": "toolu_1"}
    first, _ = tool_execute(name="start_gated", args={"gate": "never"}, **kwargs)
    again, _ = tool_execute(name="start_gated", args={"gate": "never"}, **kwargs)
    assert first == again == {"job_id": first["job_id"], "status": "queued"}
    job = Job.objects.get()
    assert job.idempotency_key == job_idempotency_key(run_id=run.id, call_id="toolu_1")
    assert job.run_id == run.id and job.session_id == session.id


@pytest.mark.django_db(transaction=True)
def test_jobs_started_by_the_model_report_back_and_shrink_once_seen(
    user: Any, rq_workers: Any
) -> None:
    session = make_session(user)
    starts = [
        {"id": "t1", "name": "start_gated", "input": {"gate": f"{session.id}-1"}},
        {"id": "t2", "name": "start_gated", "input": {"gate": f"{session.id}-2"}},
    ]
    scripted_push(session.id, {"tool_calls": starts}, {"text": "Both started."})
    _, run1 = message_post(session=session, text="start two jobs")
    run1 = wait_for_run(run1.id)
    started = results_of(run1)
    job1, job2 = started["t1"]["output"]["job_id"], started["t2"]["output"]["job_id"]
    assert started["t1"]["output"] == {"job_id": job1, "status": "queued"}
    assert Job.objects.get(pk=job1).idempotency_key == f"agent:{run1.id}:t1"
    assert Job.objects.get(pk=job1).run_id == run1.id

    steer = [
        {"id": "s1", "name": "get_job_status", "input": {"job_id": job1}},
        {"id": "s2", "name": "stop_job", "input": {"job_id": job2}},
        {"id": "s3", "name": "get_job_result", "input": {"job_id": job1}},
    ]
    scripted_push(session.id, {"tool_calls": steer}, {"text": "Stopped the second."})
    _, run2 = message_post(session=session, text="how are they doing? stop the second")
    run2 = wait_for_run(run2.id)
    steered = results_of(run2)
    assert steered["s1"]["output"]["job_id"] == job1
    assert steered["s1"]["output"]["status"] in ("queued", "running")
    assert steered["s2"]["output"]["job_id"] == job2
    assert steered["s2"]["output"]["state"] in ("cancelling", "cancelled")
    # A job still running answers with its partial results so far.
    assert not steered["s3"]["is_error"]
    assert steered["s3"]["output"]["complete"] is False
    wait_until(lambda: Job.objects.get(pk=job2).status == Job.Status.CANCELLED, timeout=30)
    wait_for_idle(session)

    scripted_push(
        session.id,
        {"tool_calls": [{"id": "r1", "name": "get_job_result", "input": {"job_id": job1}}]},
        {"text": "The first job finished."},
    )
    before = len(scripted_requests(session.id))
    gate_open(f"{session.id}-1")
    wait_until(lambda: Job.objects.get(pk=job1).status == Job.Status.DONE, timeout=30)
    wait_for_idle(session)
    reaction = scripted_requests(session.id)[before]["messages"][-1]["content"]
    assert reaction == [
        {
            "type": "text",
            "text": f"[event] job_completed job_id={job1} tool=gated status=done\n"
            f"summary: gate {session.id}-1 opened\n"
            f"details: get_job_result({job1})",
        }
    ]
    completion = Event.objects.get(session=session, payload__event="job_completed")
    assert completion.consumed_by is not None
    result = results_of(completion.consumed_by)["r1"]["output"]
    assert result["output"]["summary"] == f"gate {session.id}-1 opened"

    scripted_push(session.id, {"text": "Anything else?"})
    _, later = message_post(session=session, text="thanks")
    wait_for_run(later.id)
    history = scripted_requests(session.id)[-1]["messages"]
    texts = [b.get("text", "") for m in history for b in m["content"] if b["type"] == "text"]
    shown = [t for t in texts if f"job_id={job1}" in t]
    assert shown == [
        f"[event] job_completed job_id={job1} tool=gated status=done — gate {session.id}-1 opened"
    ]
    # The full job output never reaches the model as history.
    assert "x" * 900 not in str(history)
