"""Client-declared function tools: the model calls one, the response ends with a
``function_call`` item, and the client's ``function_call_output`` is the call's result."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from openai.types.responses import (
    FunctionTool,
    FunctionToolParam,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
)

from responses.models import AgentResponse
from sessions.llm.scripted import scripted_open, scripted_push, scripted_requests
from tests.responses.test_background import retrieve_until_ended

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER: FunctionToolParam = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
CALL = {"id": "call_weather_1", "name": "get_weather", "input": {"city": "Paris"}}


def scripted_response(client: OpenAI) -> tuple[str, str]:
    """A first response on the scripted model: its id, and its session (the script's key)."""
    first = client.responses.create(model="scripted", input="hello")
    return first.id, AgentResponse.objects.get(pk=first.id).session_id


def answer(call_id: str, output: str) -> list[Any]:
    return [{"type": "function_call_output", "call_id": call_id, "output": output}]


def test_a_function_call_ends_the_response_and_its_output_reaches_the_model(
    client: OpenAI,
) -> None:
    first_id, session_id = scripted_response(client)
    scripted_push(
        session_id,
        {"text": "Let me look.", "tool_calls": [CALL]},
        {"text": "It is sunny in Paris, 24 °C."},
    )
    asked = client.responses.create(
        model="scripted",
        input="What is the weather in Paris?",
        previous_response_id=first_id,
        tools=[WEATHER],
    )
    assert asked.status == "completed"
    assert [item.type for item in asked.output] == ["message", "function_call"]
    call = asked.output[1]
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.call_id, call.name, call.status) == ("call_weather_1", "get_weather", "completed")
    assert json.loads(call.arguments) == {"city": "Paris"} and call.id
    assert all(isinstance(tool, FunctionTool) for tool in asked.tools)
    assert [(t.name, t.strict) for t in asked.tools] == [("get_weather", True)]  # type: ignore[union-attr]
    offered = scripted_requests(session_id)[-1]["tools"]
    assert {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": WEATHER["parameters"],
    } in offered

    answered = client.responses.create(
        model="scripted",
        input=answer(call.call_id, "sunny, 24 °C"),
        previous_response_id=asked.id,
        tools=[WEATHER],
    )
    assert answered.status == "completed"
    assert answered.output_text == "It is sunny in Paris, 24 °C."
    last = scripted_requests(session_id)[-1]["messages"][-1]
    assert last == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_weather_1",
                "content": "sunny, 24 °C",
                "is_error": False,
            }
        ],
    }
    items = client.responses.input_items.list(answered.id)
    assert [item.type for item in items.data] == ["function_call_output"]


def test_a_streamed_function_call_sends_the_official_events_in_order(client: OpenAI) -> None:
    first_id, session_id = scripted_response(client)
    scripted_push(session_id, {"text": "Checking.", "tool_calls": [CALL]})
    stream = client.responses.create(
        model="scripted",
        input="weather?",
        previous_response_id=first_id,
        tools=[WEATHER],
        stream=True,
    )
    events = list(stream)
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(len(events)))
    types = [event.type for event in events]
    call_at = types.index("response.output_item.done") + 1  # after the message's events
    assert types[call_at:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, delta, done, item_done, completed = events[call_at:]
    assert isinstance(delta, ResponseFunctionCallArgumentsDeltaEvent)
    assert isinstance(done, ResponseFunctionCallArgumentsDoneEvent)
    assert added.item.type == "function_call" and added.item.status == "in_progress"  # type: ignore[union-attr]
    assert delta.item_id == done.item_id == added.item.id  # type: ignore[union-attr]
    assert json.loads(delta.delta) == json.loads(done.arguments) == {"city": "Paris"}
    assert item_done.item.status == "completed"  # type: ignore[union-attr]
    assert completed.response.output[-1].type == "function_call"  # type: ignore[union-attr]
    # Replayed from the log, the same events.
    response_id = events[0].response.id  # type: ignore[union-attr]
    replayed = list(client.responses.retrieve(response_id, stream=True))
    assert [e.model_dump() for e in replayed] == [e.model_dump() for e in events]


def test_a_background_function_call_round_trip(client: OpenAI) -> None:
    first_id, session_id = scripted_response(client)
    # The answer waits for its gate: the resumed create must answer before the turn ends.
    scripted_push(session_id, {"tool_calls": [CALL]}, {"text": "Sunny.", "gate": "answer"})
    started = client.responses.create(
        model="scripted",
        input="weather?",
        previous_response_id=first_id,
        tools=[WEATHER],
        background=True,
    )
    asked = retrieve_until_ended(client, started.id)
    assert asked.status == "completed"
    assert [item.type for item in asked.output] == ["function_call"]
    call = asked.output[0]
    assert isinstance(call, ResponseFunctionToolCall)

    resumed = client.responses.create(
        model="scripted",
        input=answer(call.call_id, "sunny"),
        previous_response_id=asked.id,
        background=True,
    )
    assert resumed.status in ("queued", "in_progress")
    scripted_open(session_id, "answer")
    answered = retrieve_until_ended(client, resumed.id)
    assert answered.status == "completed" and answered.output_text == "Sunny."


def test_the_offline_model_answers_in_text_whatever_tools_it_is_given(client: OpenAI) -> None:
    response = client.responses.create(
        model="offline",
        input="hello",
        tools=[WEATHER],
    )
    assert response.status == "completed" and response.output_text
    assert [item.type for item in response.output] == ["message"]
    assert response.tools[0].name == "get_weather"  # type: ignore[union-attr]


def bad_tool(**change: Any) -> dict[str, Any]:
    return {"model": "offline", "input": "hi", "tools": [{**WEATHER, **change}]}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "offline", "input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        (
            {"model": "offline", "input": "hi", "tools": [WEATHER, {"type": "file_search"}]},
            "tools[1].type",
        ),
        (bad_tool(name=None), "tools[0].name"),
        (bad_tool(name="start_run_tests"), "tools[0].name"),
        (bad_tool(name="get weather"), "tools[0].name"),
        (bad_tool(description=3), "tools[0].description"),
        (bad_tool(parameters="an object"), "tools[0].parameters"),
        (bad_tool(parameters={"type": "string"}), "tools[0].parameters"),
        (
            bad_tool(parameters={"type": "object", "properties": {"city": {"type": "town"}}}),
            "tools[0].parameters",
        ),
        (bad_tool(strict="yes"), "tools[0].strict"),
        ({"model": "offline", "input": "hi", "tools": [WEATHER, WEATHER]}, "tools[1].name"),
        ({"model": "offline", "input": answer("call_x", "out")}, "input[0].call_id"),
        (
            {"model": "offline", "input": [{"type": "function_call_output", "output": "out"}]},
            "input[0].call_id",
        ),
        (
            {"model": "offline", "input": [{"type": "function_call_output", "call_id": "c"}]},
            "input[0].output",
        ),
    ],
)
def test_bad_tools_and_outputs_are_a_400_naming_the_field(
    client: OpenAI, body: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.post("/responses", body=body, cast_to=httpx.Response)
    assert caught.value.param == param  # type: ignore[attr-defined]


def test_an_output_for_a_call_that_awaits_none_is_a_400(client: OpenAI) -> None:
    first_id, session_id = scripted_response(client)
    scripted_push(session_id, {"tool_calls": [CALL]}, {"text": "Thanks."})
    asked = client.responses.create(
        model="scripted",
        input="weather?",
        previous_response_id=first_id,
        tools=[WEATHER],
    )
    for call_id in ("call_unknown", "call_weather_1"):
        if call_id == "call_weather_1":  # answered once: a second answer is refused
            client.responses.create(
                model="scripted", input=answer(call_id, "sunny"), previous_response_id=asked.id
            )
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(
                model="scripted",
                input=[{"role": "user", "content": "and?"}, *answer(call_id, "sunny")],
                previous_response_id=asked.id,
            )
        assert caught.value.param == "input[1].call_id"  # type: ignore[attr-defined]
