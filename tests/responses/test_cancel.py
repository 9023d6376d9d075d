"""Cancelling a response stops its turn and the jobs it started, and answers once they ended."""

from __future__ import annotations

import pytest
from openai import OpenAI

from jobs.models import Job
from responses.models import AgentResponse
from sessions.llm.scripted import scripted_push
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancel_stops_the_live_job_and_answers_cancelled(client: OpenAI) -> None:
    # A request that waits for its answer (neither background nor stream) opens the session.
    first = client.responses.create(model="scripted", input="hello")
    assert first.status == "completed"
    session_id = AgentResponse.objects.get(pk=first.id).session_id
    scripted_push(
        session_id,
        {"text": "Starting a long job.", "tool_calls": [{"name": "start_sleepy", "input": {}}]},
        {"text": "It runs in the background."},
    )

    second = client.responses.create(
        model="scripted",
        input="sleep for a while",
        previous_response_id=first.id,
        background=True,
    )
    assert AgentResponse.objects.get(pk=second.id).session_id == session_id
    job = wait_until(
        lambda: Job.objects.filter(session_id=session_id, status=Job.Status.RUNNING).first()
    )
    # Meanwhile the response reads as it stands: in progress, its job's call still open.
    current = client.responses.retrieve(second.id)
    assert current.status == "in_progress" and current.usage is None
    assert [(i.type, getattr(i, "status", None)) for i in current.output][:2] == [
        ("message", "completed"),
        ("mcp_call", "in_progress"),
    ]

    cancelled = client.responses.cancel(second.id)
    assert cancelled.status == "cancelled"
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    call = next(item for item in cancelled.output if item.type == "mcp_call")
    assert call.name == "start_sleepy" and call.status == "failed"

    assert client.responses.retrieve(second.id).status == "cancelled"
    # A response that has ended keeps its status.
    assert client.responses.cancel(first.id).status == "completed"


def test_deleting_a_running_response_stops_its_job(client: OpenAI) -> None:
    first = client.responses.create(model="scripted", input="hello")
    session_id = AgentResponse.objects.get(pk=first.id).session_id
    scripted_push(
        session_id,
        {"text": "Sleeping.", "tool_calls": [{"name": "start_sleepy", "input": {}}]},
        {"text": "Started."},
    )
    running = client.responses.create(
        model="scripted", input="sleep", previous_response_id=first.id, background=True
    )
    job = wait_until(
        lambda: Job.objects.filter(session_id=session_id, status=Job.Status.RUNNING).first()
    )
    client.responses.delete(running.id)
    wait_until(lambda: Job.objects.get(pk=job.pk).status == Job.Status.CANCELLED, timeout=15)
