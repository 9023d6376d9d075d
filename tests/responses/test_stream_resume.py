"""A streamed response cut midway resumes exactly where it stopped, with either SDK call."""

from __future__ import annotations

from typing import Any

import pytest
from openai import OpenAI

pytestmark = pytest.mark.django_db(transaction=True)


def start_and_cut(client: OpenAI) -> tuple[str, list[Any]]:
    """Stream "run the tests" until its job reports progress, then drop the connection."""
    stream = client.responses.create(model="offline", input="run the tests", stream=True)
    seen: list[Any] = []
    for event in stream:
        seen.append(event)
        if event.type == "response.mcp_call.in_progress" and len(seen) > 8:
            break
    stream.close()
    assert seen[0].type == "response.created"
    return seen[0].response.id, seen


def text_of(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def assert_numbered_from(events: list[Any], first: int) -> None:
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(first, first + len(numbers)))


def test_retrieve_with_starting_after_sends_the_rest_once(client: OpenAI) -> None:
    response_id, before = start_and_cut(client)
    last = before[-1].sequence_number
    assert before[-1].type != "response.completed"

    after = list(client.responses.retrieve(response_id, stream=True, starting_after=last))
    assert_numbered_from(before + after, 0)
    assert after[-1].type == "response.completed"

    final = client.responses.retrieve(response_id)
    assert final.status == "completed"
    assert text_of(before + after) == final.output_text
    assert "The tests finished: 31 passed, 2 failed" in final.output_text

    # The stored stream is the stream that was sent: a replay from the start is identical.
    replay = list(client.responses.retrieve(response_id, stream=True))
    assert [e.model_dump() for e in replay] == [e.model_dump() for e in before + after]


def test_the_stream_helper_resumes_by_response_id(client: OpenAI) -> None:
    response_id, before = start_and_cut(client)
    last = before[-1].sequence_number

    with client.responses.stream(response_id=response_id, starting_after=last) as stream:
        after = list(stream)
        final = stream.get_final_response()
    assert_numbered_from(before + after, 0)
    assert text_of(before + after) == final.output_text
    assert final.status == "completed"
    assert [item.type for item in final.output].count("mcp_call") == 1
