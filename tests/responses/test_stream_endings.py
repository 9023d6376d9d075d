"""How a stream ends: completed, failed with the model's error, or cancelled."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from openai import OpenAI

from jobs.models import Job
from responses.models import AgentResponse
from sessions.llm.scripted import scripted_push
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def scripted_session(client: OpenAI) -> tuple[str, str]:
    first = client.responses.create(model="scripted", input="hello")
    return first.id, AgentResponse.objects.get(pk=first.id).session_id


def test_a_failed_turn_ends_the_stream_with_response_failed(client: OpenAI) -> None:
    first_id, session_id = scripted_session(client)
    scripted_push(session_id, {"text": "Half an answer", "error": "the model fell over"})
    events = list(
        client.responses.create(
            model="scripted", input="go", previous_response_id=first_id, stream=True
        )
    )
    assert [e.sequence_number for e in events] == list(range(len(events)))
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.status == "failed"
    assert last.response.error is not None and "the model fell over" in last.response.error.message
    assert last.response.output_text == "Half an answer"


def test_a_follower_sees_the_cancel_as_the_streams_last_event(client: OpenAI) -> None:
    first_id, session_id = scripted_session(client)
    scripted_push(
        session_id,
        {"text": "Sleeping.", "tool_calls": [{"name": "start_sleepy", "input": {}}]},
        {"text": "Started."},
    )
    response = client.responses.create(
        model="scripted", input="sleep", previous_response_id=first_id, background=True
    )
    wait_until(lambda: Job.objects.filter(session_id=session_id, status="running").exists())
    followed: list[Any] = []
    follower = threading.Thread(
        target=lambda: followed.extend(client.responses.retrieve(response.id, stream=True))
    )
    follower.start()
    wait_until(lambda: followed or follower.is_alive())
    client.responses.cancel(response.id)
    follower.join(30)
    assert not follower.is_alive()
    # The SDK has no class for this event (it has none for a cancelled stream): it
    # comes through untyped, the Response as a dict.
    assert followed[-1].type == "response.cancelled"
    assert followed[-1].response["status"] == "cancelled"
    assert [e.sequence_number for e in followed] == list(range(len(followed)))


def test_other_paths_and_methods_answer_in_openais_format(responses_url: str) -> None:
    unknown = httpx.get(f"{responses_url}/chat/completions")
    assert unknown.status_code == 404 and set(unknown.json()["error"]) == {
        "message",
        "type",
        "param",
        "code",
    }
    wrong = httpx.put(f"{responses_url}/responses")
    assert wrong.status_code == 405 and wrong.headers["Allow"] == "POST"
