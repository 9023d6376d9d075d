"""A client that still speaks A2A 0.3 finds agentsite from the card and works with it.

Such a client reads only the card's 0.3 fields (``url``, ``preferredTransport``,
``additionalInterfaces``, ``protocolVersion``) and speaks 0.3 on the wire:
JSON-RPC method names such as ``message/send``, HTTP+JSON under ``/v1/``. The
client here is the a2a-sdk's own 0.3 transport, handed a card read the way a 0.3
client reads it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.client.client import Client
from a2a.client.errors import A2AClientError
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskState,
)

from a2a_api.models import AgentTask
from tests.a2a.conftest import BINDINGS, run, token_for
from tests.a2a.test_round_trips import Rebuilt, artifact_texts, assistant_texts, first_task, send

pytestmark = pytest.mark.django_db(transaction=True)

V0_3_FIELDS = (
    "name",
    "description",
    "version",
    "url",
    "preferredTransport",
    "additionalInterfaces",
    "protocolVersion",
    "capabilities",
    "securitySchemes",
    "security",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
)


def card_as_0_3_reads_it(a2a_url: str) -> dict[str, Any]:
    document = httpx.get(f"{a2a_url}/.well-known/agent-card.json").json()
    return {name: document[name] for name in V0_3_FIELDS if name in document}


@asynccontextmanager
async def v0_3_client(
    a2a_url: str, token: str, binding: str, streaming: bool
) -> AsyncIterator[Client]:
    card = parse_agent_card(card_as_0_3_reads_it(a2a_url))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        config = ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
        )
        client = await create_client(card, client_config=config)
        try:
            yield client
        finally:
            await client.close()


def test_the_cards_0_3_fields_name_both_bindings(a2a_url: str) -> None:
    legacy = card_as_0_3_reads_it(a2a_url)
    assert legacy["protocolVersion"] == "0.3"
    assert (legacy["url"], legacy["preferredTransport"]) == (f"{a2a_url}/a2a/jsonrpc", "JSONRPC")
    assert legacy["additionalInterfaces"] == [{"url": f"{a2a_url}/a2a", "transport": "HTTP+JSON"}]
    card = parse_agent_card(legacy)
    assert {i.protocol_version for i in card.supported_interfaces} == {"0.3"}


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_0_3_client_sends_streams_reads_and_cancels(
    a2a_url: str, rq_workers: Any, user: Any, binding: str
) -> None:
    token = token_for(user)

    async def talk() -> tuple[Task, Any, Rebuilt, Any]:
        async with v0_3_client(a2a_url, token, binding, streaming=False) as client:
            done = await first_task(client, send("hello"))
            again = await client.get_task(GetTaskRequest(id=done.id))
        rebuilt = Rebuilt()
        async with v0_3_client(a2a_url, token, binding, streaming=True) as client:
            async for event in client.send_message(send("hello again")):
                rebuilt.take(event)
            assert rebuilt.task is not None
            with pytest.raises((TaskNotCancelableError, A2AClientError)) as ended:
                await client.cancel_task(CancelTaskRequest(id=rebuilt.task.id))
        return done, again, rebuilt, ended.value

    done, again, rebuilt, refused = run(talk())
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    session_id = AgentTask.objects.get(pk=done.id).session_id
    assert done.context_id == session_id
    assert artifact_texts(done) == assistant_texts(session_id) != []
    assert again.id == done.id and artifact_texts(again) == artifact_texts(done)
    assert rebuilt.task is not None and rebuilt.states[-1] == TaskState.TASK_STATE_COMPLETED
    assert list(rebuilt.texts.values()) == assistant_texts(rebuilt.task.context_id)
    # A task that has ended cannot be cancelled. Over JSON-RPC: 0.3's error code, the
    # same sentence. Over HTTP+JSON the SDK's 0.3 routes answer errors in 1.0's shape
    # (400, a google.rpc status), which its 0.3 client reports untyped.
    if binding == "JSONRPC":
        assert isinstance(refused, TaskNotCancelableError), refused
        assert refused.message == "The task has ended (completed).", refused
    else:
        assert "HTTP Error 400" in str(refused), refused
