"""A Responses stream whose client stops reading costs a bounded amount of memory.

As with the session streams (tests/sessions/test_slow_reader.py): past
``AGENTSITE_STREAM_SEND_BUFFER_MAX`` unread bytes the stream waits for its client,
and one that has not read for ``AGENTSITE_STREAM_STALL_S`` is dropped. The client
resumes with ``starting_after`` and gets the rest, each event once.
"""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from openai import OpenAI

from responses.models import AgentResponse
from sessions.llm.scripted import scripted_open, scripted_push
from sessions.models import Run
from tests.conftest import wait_until
from tests.responses.test_function_tools import scripted_response
from tests.sessions.test_slow_reader import BOUND, STALL_S, sse_read_until_cut_off, stalled_socket
from tests.sessions.test_stream_clients import append, daphne_running

pytestmark = pytest.mark.django_db(transaction=True)
DELTAS = 400
TEXT = "z" * 32_000  # 400 of them: 12.8 MB, more than the kernel buffers on both sides hold


@pytest.fixture(scope="module")
def web(processes: Any) -> Iterator[str]:
    env = {"AGENTSITE_STREAM_SEND_BUFFER_MAX": str(BOUND), "AGENTSITE_STREAM_STALL_S": str(STALL_S)}
    with daphne_running(processes, "daphne-slow-responses", env=env) as url:
        yield url


def stream_request(web: str, api_key: str, body: dict[str, Any]) -> http.client.HTTPResponse:
    """POST a streamed response over a connection that barely reads."""
    host, port = web.removeprefix("http://").split(":")
    stalled = http.client.HTTPConnection(host, int(port))
    stalled.sock = stalled_socket(web)
    stalled.sock.settimeout(20)
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    stalled.request("POST", "/v1/responses", body=json.dumps(body), headers=headers)
    return stalled.getresponse()


async def test_a_response_stream_that_stops_being_read_is_dropped_and_resumes_without_loss(
    web: str, client: OpenAI
) -> None:
    first_id, session_id = await asyncio.to_thread(scripted_response, client)
    scripted_push(session_id, {"text": "Start.", "gate": "hold"})
    body = {
        "model": "scripted",
        "input": "a long one",
        "previous_response_id": first_id,
        "stream": True,
    }
    response = await asyncio.to_thread(stream_request, web, client.api_key, body)
    assert response.status == 200

    def running_run() -> Run | None:
        return Run.objects.filter(session_id=session_id, status=Run.Status.RUNNING).first()

    run = await asyncio.to_thread(wait_until, running_run)
    # The turn goes on (its text, here written straight to its log) while the client
    # reads nothing, for longer than the server waits for a reader.
    for _ in range(DELTAS):
        await append(
            session_id=session_id, kind="assistant_delta", payload={"text": TEXT}, run_id=run.id
        )
    await asyncio.sleep(3 * STALL_S)

    received, dropped = await asyncio.to_thread(sse_read_until_cut_off, response)
    assert dropped
    numbers = [event["data"]["sequence_number"] for event in received]
    assert numbers == list(range(len(numbers)))
    big = sum(1 for e in received if e["data"].get("delta") == TEXT)
    assert big < DELTAS  # dropped: not everything was kept for it

    # Resumed after the last event it saw: the rest, each once, to the response's end.
    response_id = await database_sync_to_async(
        lambda: AgentResponse.objects.filter(session_id=session_id).latest("input_seq").pk
    )()
    scripted_open(session_id, "hold")
    after = numbers[-1] if numbers else -1
    rest = await asyncio.to_thread(
        lambda: list(client.responses.retrieve(response_id, stream=True, starting_after=after))
    )
    assert [e.sequence_number for e in rest] == list(range(after + 1, after + 1 + len(rest)))
    assert rest[-1].type == "response.completed"
    deltas = [e for e in received if e["data"]["type"] == "response.output_text.delta"]
    later = [e for e in rest if e.type == "response.output_text.delta"]
    assert big + sum(1 for e in later if e.delta == TEXT) == DELTAS  # type: ignore[union-attr]
    assert len(deltas) + len(later) == DELTAS + 1  # and the turn's own "Start."
