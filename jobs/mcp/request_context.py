"""What the handlers of both protocol versions read of a request and call through.

The user the endpoint authenticated, the protocol version the request speaks
(2026-07-28's per-request envelope is the current spec, 2025-11-25's handshake
the previous one), and the hop off the event loop that turns the service calls'
refusals into JSON-RPC errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import mcp_types as types
from channels.db import database_sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from jobs.mcp import calls, mapping

Ctx = ServerRequestContext[dict[str, Any], Any]
T = TypeVar("T")


class TaskIdParams(types.RequestParams):
    task_id: str


def request_owner(ctx: Ctx) -> AbstractBaseUser:
    """The user the endpoint authenticated for the HTTP request carrying this message."""
    request = ctx.request
    user = request.scope.get("agentsite.user") if request is not None else None
    if user is None:
        raise MCPError(types.INTERNAL_ERROR, "request is not authenticated")
    return user  # type: ignore[no-any-return]


def is_current_spec(ctx: Ctx) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


async def in_thread(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run a sync service call off the event loop; its errors become JSON-RPC errors."""
    try:
        return await database_sync_to_async(fn, thread_sensitive=False)(**kwargs)  # type: ignore[no-any-return]
    except calls.McpCallError as exc:
        raise MCPError(exc.code, exc.message, exc.data) from exc


def rejected_input_result(exc: calls.ToolInputRejected) -> types.CallToolResult:
    output: Any = (
        exc.message if exc.details is None else {"error": exc.message, "details": exc.details}
    )
    return types.CallToolResult.model_validate(mapping.tool_result(output, is_error=True))
