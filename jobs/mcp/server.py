"""The MCP server: tools from the registry, async tools as tasks, in either protocol version.

One lowlevel ``Server`` serves both task vocabularies; the protocol version of
each request picks one: ``current_spec`` (2026-07-28, the tasks extension) or
``previous_spec`` (2025-11-25, core tasks). What both share lives here: the
tool list, blocking tool calls, the routing of each task method to its
version's handler, and unexpected errors as JSON-RPC errors.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from jobs import inline, registry
from jobs.mcp import calls, current_spec, mapping, previous_spec
from jobs.mcp.request_context import (
    Ctx,
    TaskIdParams,
    in_thread,
    is_current_spec,
    rejected_input_result,
    request_owner,
)

logger = logging.getLogger(__name__)

Handler = Callable[[Ctx, Any], Awaitable[HandlerResult]]

INSTRUCTIONS = (
    "agentsite's tools. Blocking tools answer at once. Long tools (run_tests, crawl_site, "
    "write_report, ...) run as tasks: call them with the tasks extension "
    "(io.modelcontextprotocol/tasks) or, on 2025-11-25, with params.task, then poll tasks/get."
)
TASK_SUPPORT_META_KEY = "agentsite/taskSupport"


class AgentsiteServer(Server[dict[str, Any]]):
    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options,
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        if protocol_version not in MODERN_PROTOCOL_VERSIONS:
            capabilities.tasks = previous_spec.tasks_capability()
        return capabilities


def tool_listing(tool: registry.Tool) -> types.Tool:
    support: Literal["required", "forbidden"] = "required" if tool.kind == "async" else "forbidden"
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema(),
        execution=types.ToolExecution(task_support=support),
        # The 2026-07-28 tool shape has no `execution`; say the same in `_meta`.
        _meta={TASK_SUPPORT_META_KEY: support},
    )


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[tool_listing(tool) for tool in registry.all_tools()])


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> HandlerResult:
    """A blocking tool answers here; an async one is a task of the request's version.

    (A 2025-11-25 call with ``params.task`` never gets here: see
    ``previous_spec.task_augmented_calls``.)
    """
    owner = request_owner(ctx)
    tool = await in_thread(calls.tool_named, name=params.name)
    args = params.arguments or {}
    if tool.kind == "blocking":
        call = functools.partial(calls.blocking_call, owner=owner, tool=tool.name, args=args)
        try:
            result = await inline.blocking_tool_run(tool, call)
        except calls.ToolInputRejected as exc:
            return rejected_input_result(exc)
        except calls.McpCallError as exc:
            raise MCPError(exc.code, exc.message, exc.data) from exc
        except inline.BlockingToolTimedOut as exc:
            result = mapping.tool_result(str(exc), is_error=True)
        return types.CallToolResult.model_validate(result)
    if not is_current_spec(ctx):
        previous_spec.call_without_task(tool)
    return await current_spec.task_call(ctx, owner=owner, tool=tool, args=args)


def by_spec(*, current: Handler | None, previous: Handler | None) -> Handler:
    """One method's handler per protocol version; a version without one has no such method."""

    async def handle(ctx: Ctx, params: Any) -> HandlerResult:
        handler = current if is_current_spec(ctx) else previous
        if handler is None:
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", ctx.method)
        return await handler(ctx, params)

    return handle


async def internal_errors_as_jsonrpc(ctx: Ctx, call_next: CallNext) -> HandlerResult:
    """Unexpected exceptions become -32603 with no internals, on every transport path."""
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError, anyio.get_cancelled_exc_class()):
        raise
    except Exception as exc:
        logger.exception("MCP %s failed", ctx.method)
        raise MCPError(types.INTERNAL_ERROR, "Internal error") from exc


def build_server() -> AgentsiteServer:
    server = AgentsiteServer(
        "agentsite",
        version="1",
        instructions=INSTRUCTIONS,
        lifespan=previous_spec.status_watchers,
    )
    tasks_get = by_spec(current=current_spec.tasks_get, previous=previous_spec.tasks_get)
    tasks_cancel = by_spec(current=current_spec.tasks_cancel, previous=previous_spec.tasks_cancel)
    tasks_update = by_spec(current=current_spec.tasks_update, previous=None)
    tasks_result = by_spec(current=None, previous=previous_spec.tasks_result)
    tasks_list = by_spec(current=None, previous=previous_spec.tasks_list)
    handlers: list[tuple[str, type[Any], Handler]] = [
        ("tools/list", types.PaginatedRequestParams, list_tools),
        ("tools/call", types.CallToolRequestParams, call_tool),
        (
            "subscriptions/listen",
            types.SubscriptionsListenRequestParams,
            current_spec.subscriptions_listen,
        ),
        ("tasks/get", TaskIdParams, tasks_get),
        ("tasks/cancel", TaskIdParams, tasks_cancel),
        ("tasks/update", current_spec.TaskUpdateParams, tasks_update),
        ("tasks/result", TaskIdParams, tasks_result),
        ("tasks/list", types.PaginatedRequestParams, tasks_list),
    ]
    for method, params_type, handler in handlers:
        server.add_request_handler(method, params_type, handler)
    server.middleware.extend([internal_errors_as_jsonrpc, previous_spec.task_augmented_calls])
    server.extensions = {mapping.TASKS_EXTENSION: {}}
    return server
