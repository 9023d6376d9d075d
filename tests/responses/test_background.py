"""A background response answers at once and is retrieved until it has ended."""

from __future__ import annotations

import time
from typing import Any

import pytest
from openai import OpenAI
from openai.types.responses import Response

from jobs.models import Job
from responses.models import AgentResponse
from sessions.services import session_list

pytestmark = pytest.mark.django_db(transaction=True)


def retrieve_until_ended(client: OpenAI, response_id: str, timeout: float = 60) -> Response:
    deadline = time.monotonic() + timeout
    while True:
        response = client.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            return response
        assert time.monotonic() < deadline, f"still {response.status}"
        time.sleep(0.2)


def test_a_background_response_ends_with_the_report_on_the_job_it_started(
    client: OpenAI, user: Any
) -> None:
    started = client.responses.create(model="offline", input="run the tests", background=True)
    assert started.status in ("queued", "in_progress")
    assert started.id.startswith("resp_") and started.background

    done = retrieve_until_ended(client, started.id)
    assert done.status == "completed", done
    assert "The tests finished: 31 passed, 2 failed" in done.output_text
    calls = [item for item in done.output if item.type == "mcp_call"]
    assert [c.name for c in calls] == ["start_run_tests"]
    assert calls[0].server_label == "agentsite" and calls[0].status == "completed"
    assert (calls[0].output or "").startswith("31 passed, 2 failed")
    assert done.usage is not None and done.usage.output_tokens > 0

    record = AgentResponse.objects.get(pk=started.id)
    job = Job.objects.get(session_id=record.session_id)
    assert job.status == Job.Status.DONE
    # The session is one of the user's sessions, listed in the browser like any other.
    assert record.session in session_list(owner=user)
