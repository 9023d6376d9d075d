"""Bad input gets the JSON-RPC error the spec names (or HTTP 401), never a 500."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from jobs.models import Job
from tests.mcp.client import TasksExtension, connect, get_task

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = "2026-07-28"


def modern_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": envelope}}


def post(url: str, token: str | None, body: bytes, *, modern: bool) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if modern:
        headers["MCP-Protocol-Version"] = MODERN
    return httpx.post(url, content=body, headers=headers, timeout=10)


def test_an_unknown_tool_is_invalid_params(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> MCPError:
        async with connect(mcp_url, token, extensions=[TasksExtension()]) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("no_such_tool", {})
            return caught.value

    error = anyio.run(scenario)
    assert error.error.code == -32602
    assert error.error.message == "Unknown tool: no_such_tool"


def test_arguments_that_do_not_validate_are_a_tool_execution_error(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> tuple[Any, Any]:
        async with connect(mcp_url, token, extensions=[TasksExtension()]) as client:
            blocking = await client.call_tool("read_file", {"path": 5})
            long = await client.session.call_tool(
                "mcp_nap", {"seconds": "soon"}, allow_claimed=True
            )
            return blocking, long

    blocking, long = anyio.run(scenario)

    for result in (blocking, long):
        assert result.is_error is True
        assert "do not match the input schema" in result.structured_content["error"]
        assert result.structured_content["details"][0]["loc"]
    assert not Job.objects.exists()


def test_arguments_that_are_not_an_object_are_invalid_params(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    body = modern_request("tools/call", {"name": "now", "arguments": "now please"})
    headers_name = {"Mcp-Method": "tools/call", "Mcp-Name": "now"}
    response = httpx.post(
        mcp_url,
        json=body,
        headers={
            "Authorization": f"Bearer {token_for(user)}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            **headers_name,
        },
        timeout=10,
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_an_unknown_task_id_is_invalid_params(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> list[MCPError]:
        errors = []
        async with connect(mcp_url, token, extensions=[TasksExtension()]) as client:
            for task_id in ("job_0000000000000000", "not even an id"):
                with pytest.raises(MCPError) as caught:
                    await get_task(client.session, task_id)
                errors.append(caught.value)
        return errors

    errors = anyio.run(scenario)
    assert [e.error.code for e in errors] == [-32602, -32602]
    assert errors[0].error.message.startswith("Failed to retrieve task: Task not found.")


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
def test_malformed_json_rpc_is_a_parse_error_or_an_invalid_request(
    mcp_url: str, user: Any, token_for: Callable[[Any], str], modern: bool
) -> None:
    token = token_for(user)

    not_json = post(mcp_url, token, b"{not json", modern=modern)
    not_jsonrpc = post(mcp_url, token, b'{"hello": "world"}', modern=modern)
    batch = b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]'
    a_batch = post(mcp_url, token, batch, modern=modern)

    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == -32700
    for response in (not_jsonrpc, a_batch):
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32600


def test_a_missing_or_wrong_token_is_http_401(mcp_url: str) -> None:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    for token in (None, "ast_not-a-real-token"):
        response = post(mcp_url, token, body, modern=False)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer ")
        assert response.json()["error"] == "invalid_token"

    async def scenario() -> None:
        async with connect(mcp_url, None):
            pass

    with pytest.raises(BaseException) as caught:
        anyio.run(scenario)
    # The official client cannot even connect (it reports the 401 as an error response).
    assert any(isinstance(leaf, MCPError) for leaf in leaves(caught.value))


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc, *(leaves(exc.__cause__) if exc.__cause__ else [])]
