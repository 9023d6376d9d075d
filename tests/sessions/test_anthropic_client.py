"""The Anthropic client: the official SDK, streaming, against a local Messages server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sessions.events import event_append
from sessions.llm import get_model_client
from sessions.llm.claude import AnthropicModel
from sessions.models import Event, Run
from sessions.runtime import run_execute
from tests.sessions.factories import make_session, messages
from tests.sessions.messages_server import MessagesServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(settings: Any) -> Iterator[MessagesServer]:
    with MessagesServer() as srv:
        settings.ANTHROPIC_BASE_URL = srv.url
        settings.ANTHROPIC_API_KEY = "sk-test-key"
        settings.AGENTSITE_ALLOWED_MODELS = ["offline", "claude-test-model"]
        yield srv


def turn(user: Any, text: str) -> Run:
    """Run one turn in this process (no worker: the server lives here)."""
    session = make_session(user, model="claude-test-model")
    event_append(session_id=session.id, kind="user_message", payload={"text": text}, pending=True)
    run = Run.objects.create(session=session, owner=user)
    run_execute(run_id=run.id)
    run.refresh_from_db()
    return run


def test_claude_names_select_the_anthropic_client(db: None) -> None:
    client = get_model_client("claude-test-model")
    assert isinstance(client, AnthropicModel) and client.name == "claude-test-model"


def test_a_tool_use_round_trip_through_the_sdk(user: Any, server: MessagesServer) -> None:
    server.replies = [
        {
            "text": "Let me check that.",
            "tool_use": {"id": "toolu_01", "name": "pause_read", "input": {"seconds": 0.01}},
        },
        {"text": "It paused briefly."},
    ]
    run = turn(user, "pause a little")

    assert run.status == Run.Status.COMPLETED
    assert messages(run.session, run) == ["Let me check that.", "It paused briefly."]
    call = Event.objects.get(run=run, kind="tool_call").payload
    assert call == {"id": "toolu_01", "name": "pause_read", "input": {"seconds": 0.01}}
    result = Event.objects.get(run=run, kind="tool_result").payload
    assert result["tool_call_id"] == "toolu_01" and not result["is_error"]
    assert run.usage == {"input_tokens": 84, "output_tokens": 34, "model_calls": 2}

    first, second = server.requests
    assert first["model"] == "claude-test-model" and first["stream"] is True
    assert first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "pause a little"}]}
    ]
    assert "start_gated" in {t["name"] for t in first["tools"]}
    assert second["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "pause_read",
        "input": {"seconds": 0.01},
    }
    assert second["messages"][2]["content"][0]["tool_use_id"] == "toolu_01"
    sent = server.headers[0]
    assert "sk-test-key" in (sent.get("x-api-key", ""), sent.get("authorization", "")[7:])


def test_an_api_error_fails_the_run_with_a_clear_error(user: Any, server: MessagesServer) -> None:
    server.replies = [
        {"status": 400, "type": "invalid_request_error", "message": "messages: bad shape"}
    ]
    run = turn(user, "hello")

    assert run.status == Run.Status.FAILED
    error = Event.objects.get(run=run, kind="error").payload
    assert error["code"] == "model_error"
    assert "400" in error["message"] and "messages: bad shape" in error["message"]
    assert len(server.requests) == 1  # a client error is not retried


def test_the_sdk_retries_an_overloaded_api(user: Any, server: MessagesServer) -> None:
    server.replies = [
        {"status": 529, "type": "overloaded_error", "message": "Overloaded"},
        {"text": "Here now."},
    ]
    run = turn(user, "hello")

    assert run.status == Run.Status.COMPLETED
    assert messages(run.session, run) == ["Here now."]
    assert len(server.requests) == 2


def test_a_client_tool_is_offered_to_claude_and_its_call_ends_the_turn(
    user: Any, server: MessagesServer
) -> None:
    weather = {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    server.replies = [
        {
            "text": "Checking.",
            "tool_use": {"id": "toolu_c1", "name": "get_weather", "input": {"city": "Paris"}},
        }
    ]
    session = make_session(user, model="claude-test-model")
    message = {"text": "weather?", "client_tools": [weather]}
    event_append(session_id=session.id, kind="user_message", payload=message, pending=True)
    run = Run.objects.create(session=session, owner=user)
    run_execute(run_id=run.id)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert len(server.requests) == 1 and weather in server.requests[0]["tools"]
    call = Event.objects.get(run=run, kind="tool_call").payload
    assert call == {
        "id": "toolu_c1",
        "name": "get_weather",
        "input": {"city": "Paris"},
        "client": True,
    }
    assert not Event.objects.filter(run=run, kind="tool_result").exists()
