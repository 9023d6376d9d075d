"""A2A on the wire as clients other than the a2a-sdk's send it: raw JSON-RPC and HTTP+JSON.

The requests are those of the A2A compatibility kit (a2aproject/a2a-tck), whose
clients join paths to the card's URLs and whose checks read error codes and
statuses: the JSON-RPC endpoint with a trailing slash, a part of a media type
the agent does not take, a context the caller does not have.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from a2a_api.models import AgentTask
from sessions.models import AgentSession
from tests.a2a.conftest import token_for

pytestmark = pytest.mark.django_db(transaction=True)


def sent(a2a_url: str, token: str, binding: str, message: dict[str, Any]) -> httpx.Response:
    """``SendMessage`` with ``message``, as the binding carries it."""
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    if binding == "JSONRPC":
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        return httpx.post(f"{a2a_url}/a2a/jsonrpc", json=body, headers=headers, timeout=30)
    return httpx.post(
        f"{a2a_url}/a2a/message:send", json={"message": message}, headers=headers, timeout=30
    )


def user_message(**fields: Any) -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), **fields}


def test_the_json_rpc_endpoint_takes_its_url_with_a_trailing_slash_too(
    a2a_url: str, user: Any
) -> None:
    headers = {"Authorization": f"Bearer {token_for(user)}", "A2A-Version": "1.0"}
    body = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "task_nosuchtask"}}
    for path in ("/a2a/jsonrpc", "/a2a/jsonrpc/"):
        answer = httpx.post(f"{a2a_url}{path}", json=body, headers=headers, timeout=30)
        assert answer.status_code == 200, (path, answer.text)
        assert answer.json()["id"] == 7
        assert answer.json()["error"]["code"] == -32001, path  # TaskNotFoundError


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_part_of_a_media_type_the_agent_does_not_take_is_refused_as_such(
    a2a_url: str, user: Any, binding: str
) -> None:
    part = {"raw": "dGNr", "mediaType": "application/x-unknown"}
    answer = sent(a2a_url, token_for(user), binding, user_message(parts=[part]))
    if binding == "JSONRPC":
        assert answer.json()["error"]["code"] == -32005  # ContentTypeNotSupportedError
    else:
        assert answer.status_code == 400, answer.text
        reasons = [d.get("reason") for d in answer.json()["error"].get("details", [])]
        assert "CONTENT_TYPE_NOT_SUPPORTED" in reasons, answer.text
    assert not AgentTask.objects.filter(owner=user).exists()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_context_the_caller_does_not_have_is_refused_and_none_is_made(
    a2a_url: str, user: Any, binding: str
) -> None:
    message = user_message(parts=[{"text": "hello"}], contextId="ses_madeupbytheclient")
    answer = sent(a2a_url, token_for(user), binding, message)
    if binding == "JSONRPC":
        assert answer.json()["error"]["code"] == -32602  # InvalidParams
    else:
        assert answer.status_code == 400, answer.text
    assert "No context with id 'ses_madeupbytheclient'" in answer.text
    assert not AgentSession.objects.filter(owner=user).exists()
