"""Tools a client carries out itself: offered to the model, a call ends the turn waiting,
and the client's answer in its next message is the call's result."""

from __future__ import annotations

from typing import Any

import pytest

from agentsite.core.errors import Invalid
from sessions.client_tools import client_calls_awaiting
from sessions.conversation import UNANSWERED, tool_results_paired
from sessions.llm.scripted import scripted_push, scripted_requests
from sessions.models import Event, Run
from sessions.payloads import ClientTool
from sessions.services import message_post
from tests.conftest import wait_until
from tests.sessions.factories import kinds, make_session, messages, wait_for_idle, wait_for_run
from tests.sessions.tools_for_tests import gate_open

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER: ClientTool = {
    "name": "get_weather",
    "description": "The weather in a city, from the client's own service.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def call(call_id: str, name: str = "get_weather", **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "input": args or {"city": "Paris"}}


def last_user_content(request: dict[str, Any]) -> list[dict[str, Any]]:
    last = request["messages"][-1]
    assert last["role"] == "user"
    content: list[dict[str, Any]] = last["content"]
    return content


def test_a_call_of_a_client_tool_ends_the_turn_and_its_answer_is_the_result(
    user: Any, rq_workers: Any
) -> None:
    session = make_session(user)
    scripted_push(
        session.id,
        {"text": "Let me look.", "tool_calls": [call("call_w1")]},
        {"text": "It is sunny in Paris."},
    )
    _, run = message_post(session=session, text="weather in Paris?", client_tools=[WEATHER])
    assert wait_for_run(run.id).status == Run.Status.COMPLETED

    # Offered beside agentsite's own tools; called, and nothing ran it on the server.
    first = scripted_requests(session.id)[0]
    assert WEATHER in first["tools"] and any(t["name"] == "stop_job" for t in first["tools"])
    assert kinds(session) == [
        "user_message",
        "run_started",
        "assistant_message",
        "tool_call",
        "run_finished",
    ]
    called = Event.objects.get(session=session, kind="tool_call").payload
    assert called == {**call("call_w1"), "client": True}
    assert Run.objects.get(pk=run.pk).client_tools == [WEATHER]
    assert client_calls_awaiting(session_id=session.id) == {"call_w1"}

    _, answer_run = message_post(
        session=session,
        text="",
        tool_results=[{"tool_call_id": "call_w1", "output": "sunny, 24 °C"}],
    )
    assert wait_for_run(answer_run.id).status == Run.Status.COMPLETED
    second = scripted_requests(session.id)[1]
    assert second["messages"][-2]["content"][-1] == {
        "type": "tool_use",
        "id": "call_w1",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert last_user_content(second) == [
        {
            "type": "tool_result",
            "tool_use_id": "call_w1",
            "content": "sunny, 24 °C",
            "is_error": False,
        }
    ]
    assert messages(session)[-1] == "It is sunny in Paris."
    assert client_calls_awaiting(session_id=session.id) == set()
    # A message without tools offers none of the client's.
    assert WEATHER not in second["tools"]


def test_agentsite_tools_called_beside_a_client_tool_run_and_both_results_come_back(
    user: Any, rq_workers: Any
) -> None:
    session = make_session(user)
    scripted_push(
        session.id,
        {"tool_calls": [call("call_r", "pause_read", seconds=0), call("call_w2")]},
        {"text": "Done."},
    )
    _, run = message_post(session=session, text="both", client_tools=[WEATHER])
    wait_for_run(run.id)
    results = Event.objects.filter(session=session, kind="tool_result")
    assert [r.payload["tool_call_id"] for r in results] == ["call_r"]
    assert len(scripted_requests(session.id)) == 1  # the turn ended waiting for the client

    _, answer_run = message_post(
        session=session, text="", tool_results=[{"tool_call_id": "call_w2", "output": "rain"}]
    )
    wait_for_run(answer_run.id)
    content = last_user_content(scripted_requests(session.id)[1])
    assert [(b["tool_use_id"], b["is_error"]) for b in content] == [
        ("call_r", False),
        ("call_w2", False),
    ]
    assert content[1]["content"] == "rain"


def test_answers_to_no_awaiting_call_are_refused(user: Any, rq_workers: Any) -> None:
    session = make_session(user)
    scripted_push(session.id, {"tool_calls": [call("call_w3")]}, {"text": "ok"})
    _, run = message_post(session=session, text="go", client_tools=[WEATHER])
    wait_for_run(run.id)
    for results in (
        [{"tool_call_id": "call_unknown", "output": "x"}],
        [{"tool_call_id": "call_w3", "output": "x"}, {"tool_call_id": "call_w3", "output": "y"}],
    ):
        with pytest.raises(Invalid) as refused:
            message_post(session=session, text="", tool_results=results)  # type: ignore[arg-type]
        assert refused.value.code == "unknown_tool_call"
    message_post(
        session=session, text="", tool_results=[{"tool_call_id": "call_w3", "output": "x"}]
    )
    with pytest.raises(Invalid):
        message_post(
            session=session, text="", tool_results=[{"tool_call_id": "call_w3", "output": "again"}]
        )
    wait_for_idle(session)


@pytest.mark.parametrize(
    ("tools", "code", "index"),
    [
        ([{**WEATHER, "name": "start_run_tests"}], "tool_name_taken", 0),
        ([{**WEATHER, "name": "get weather"}], "invalid_tool_name", 0),
        ([WEATHER, WEATHER], "duplicate_tool_name", 1),
        ([{**WEATHER, "input_schema": {"type": "array"}}], "invalid_tool_schema", 0),
        (
            [{**WEATHER, "input_schema": {"type": "object", "properties": {"x": {"type": 3}}}}],
            "invalid_tool_schema",
            0,
        ),
    ],
)
def test_tools_a_model_could_not_be_offered_are_refused(
    user: Any, tools: list[ClientTool], code: str, index: int
) -> None:
    session = make_session(user)
    with pytest.raises(Invalid) as refused:
        message_post(session=session, text="hi", client_tools=tools)
    assert (refused.value.code, refused.value.details) == (code, {"index": index})
    assert not Event.objects.filter(session=session).exists()


def test_the_turn_that_reports_on_a_job_offers_the_client_tools_of_the_turn_that_started_it(
    user: Any, rq_workers: Any
) -> None:
    session = make_session(user)
    scripted_push(
        session.id,
        {"text": "Started.", "tool_calls": [call("call_g", "start_gated", gate="client-tools")]},
        {"text": "Started, as you see."},
        {"text": "The job is done.", "tool_calls": [call("call_w4")]},
    )
    _, run = message_post(session=session, text="start it", client_tools=[WEATHER])
    wait_for_run(run.id)
    gate_open("client-tools")
    wait_until(lambda: len(scripted_requests(session.id)) == 3, timeout=60)
    wait_for_idle(session)
    report = scripted_requests(session.id)[2]
    assert WEATHER in report["tools"]
    assert client_calls_awaiting(session_id=session.id) == {"call_w4"}


def test_a_late_answer_becomes_text_and_an_unanswered_call_an_error_result() -> None:
    use = {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {}}
    late = {"type": "tool_result", "tool_use_id": "c1", "content": "sunny", "is_error": False}
    paired = tool_results_paired(
        [
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{"type": "text", "text": "from the browser"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
            {"role": "user", "content": [late]},
        ]
    )
    assert paired[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": UNANSWERED, "is_error": True},
        {"type": "text", "text": "from the browser"},
    ]
    assert paired[4]["content"] == [{"type": "text", "text": "[result of call c1] sunny"}]
