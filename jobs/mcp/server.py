"""The MCP request handlers: tools from the registry, async tools as tasks.

One lowlevel ``Server`` serves both task vocabularies; the protocol version of
each request picks one:

- 2026-07-28 (per-request envelope): the ``io.modelcontextprotocol/tasks``
  extension. ``tools/call`` of an async tool answers a ``CreateTaskResult``
  (``resultType: "task"``) to a client that declared the extension on that
  request, ``-32021`` otherwise; ``tasks/get`` carries the result inline once
  terminal; ``tasks/cancel`` is an acknowledgement; ``subscriptions/listen``
  with ``taskIds`` streams ``notifications/tasks``.
- 2025-11-25 (initialize handshake): task-augmented ``tools/call``
  (``params.task``), ``tasks/get``, ``tasks/result``, ``tasks/list``,
  ``tasks/cancel`` and ``notifications/tasks/status`` on the session's stream.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

import anyio
import mcp_types as types
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, ValidationError

from jobs import inline, registry
from jobs.mcp import calls, mapping
from jobs.mcp.watch import task_changes, task_finished

logger = logging.getLogger(__name__)

Ctx = ServerRequestContext[dict[str, Any], Any]
T = TypeVar("T")

INSTRUCTIONS = (
    "agentsite's tools. Blocking tools answer at once. Long tools (run_tests, crawl_site, "
    "write_report, ...) run as tasks: call them with the tasks extension "
    "(io.modelcontextprotocol/tasks) or, on 2025-11-25, with params.task, then poll tasks/get."
)
TASK_SUPPORT_META_KEY = "agentsite/taskSupport"


class TaskIdParams(types.RequestParams):
    task_id: str


class TaskUpdateParams(TaskIdParams):
    model_config = ConfigDict(extra="allow")


class TasksNotificationParams(types.NotificationParams):
    model_config = ConfigDict(extra="allow")


class TasksNotification(
    types.Notification[TasksNotificationParams, Literal["notifications/tasks"]]
):
    """``notifications/tasks`` of the tasks extension: a full ``DetailedTask``."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: TasksNotificationParams


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
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            return capabilities
        # 2025-11-25 declares tasks as a core capability.
        capabilities.tasks = types.ServerTasksCapability(
            list=types.TasksListCapability(),
            cancel=types.TasksCancelCapability(),
            requests=types.ServerTasksRequestsCapability(
                tools=types.TasksToolsCapability(call=types.TasksCallCapability())
            ),
        )
        return capabilities


# --- helpers -------------------------------------------------------------------------


def request_owner(ctx: Ctx) -> AbstractBaseUser:
    """The user the endpoint authenticated for the HTTP request carrying this message."""
    request = ctx.request
    user = request.scope.get("agentsite.user") if request is not None else None
    if user is None:
        raise MCPError(types.INTERNAL_ERROR, "request is not authenticated")
    return user  # type: ignore[no-any-return]


def is_modern(ctx: Ctx) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def declares_tasks_extension(ctx: Ctx) -> bool:
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and mapping.TASKS_EXTENSION in extensions  # type: ignore[operator]


def require_era(ctx: Ctx, *, modern: bool) -> None:
    """Each task vocabulary's methods exist only at its own protocol versions."""
    if is_modern(ctx) != modern:
        raise MCPError(types.METHOD_NOT_FOUND, "Method not found", ctx.method)


def require_tasks_extension(ctx: Ctx) -> None:
    if not declares_tasks_extension(ctx):
        raise MCPError(
            mapping.MISSING_CAPABILITY,
            "Missing required client capability",
            mapping.missing_capability_data(),
        )


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


# --- tools -----------------------------------------------------------------------------


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
    if not is_modern(ctx):
        raise MCPError(
            types.METHOD_NOT_FOUND,
            f"Tool {tool.name!r} runs as a task: call it with params.task",
        )
    require_tasks_extension(ctx)
    try:
        job = await in_thread(
            calls.job_start,
            owner=owner,
            tool=tool.name,
            args=args,
            # A 2026-07-28 request carries no session; request ids repeat across clients.
            idempotency_key=f"mcp:{uuid.uuid4().hex}",
        )
    except calls.ToolInputRejected as exc:
        return rejected_input_result(exc)
    return mapping.create_task_result(job)


async def legacy_task_augmented_calls(ctx: Ctx, call_next: CallNext) -> HandlerResult:
    """Serve a 2025-11-25 ``tools/call`` that carries ``params.task``.

    Runs as middleware because the SDK shapes every ``tools/call`` result into a
    ``CallToolResult`` for handshake-era versions, and a ``CreateTaskResult`` is not one.
    """
    raw = ctx.params
    if (
        ctx.method != "tools/call"
        or is_modern(ctx)
        or not isinstance(raw, Mapping)
        or raw.get("task") is None
    ):
        return await call_next(ctx)
    params = types.CallToolRequestParams.model_validate(raw, by_name=False)
    owner = request_owner(ctx)
    tool = await in_thread(calls.tool_named, name=params.name)
    if tool.kind == "blocking":
        raise MCPError(
            types.METHOD_NOT_FOUND, f"Tool {tool.name!r} does not support task-augmented calls"
        )
    session_id = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
    # A retried request (same session, same id) finds its job again.
    key = f"mcp:{session_id or uuid.uuid4().hex}:{ctx.request_id}"
    try:
        job = await in_thread(
            calls.job_start,
            owner=owner,
            tool=tool.name,
            args=params.arguments or {},
            idempotency_key=key,
        )
    except calls.ToolInputRejected as exc:
        raise MCPError(types.INVALID_PARAMS, exc.message, exc.details) from exc
    ctx.lifespan_context["watchers"].start_soon(
        push_legacy_task_status, ctx, owner, job.id, mapping.observed_state(job)
    )
    return {"task": mapping.legacy_task_doc(job)}


async def push_legacy_task_status(
    ctx: Ctx, owner: AbstractBaseUser, task_id: str, announced: tuple[str, str, float | None]
) -> None:
    """Send ``notifications/tasks/status`` on the session's stream until the task ends."""
    try:
        async for job in task_changes(owner=owner, task_ids=[task_id]):
            if mapping.observed_state(job) == announced:
                continue
            params = types.TaskStatusNotificationParams.model_validate(mapping.legacy_task_doc(job))
            # Task notifications are outside the SDK's core union; the session sends any model.
            notification = types.TaskStatusNotification(params=params)
            await ctx.session.send_notification(notification)  # type: ignore[arg-type]
    except Exception:  # the session went away; the task itself is unaffected
        logger.debug("stopped pushing status of %s", task_id, exc_info=True)


# --- tasks ------------------------------------------------------------------------------

# Beyond the stop grace period: the forced stop and its record.
CANCEL_SETTLE_S = 5.0


async def tasks_get(ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    owner = request_owner(ctx)
    if is_modern(ctx):
        require_tasks_extension(ctx)
        return await in_thread(calls.task_doc, owner=owner, task_id=params.task_id)
    return await in_thread(calls.legacy_task_doc, owner=owner, task_id=params.task_id)


async def tasks_cancel(ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    owner = request_owner(ctx)
    if is_modern(ctx):
        require_tasks_extension(ctx)
        # Cooperative: an acknowledgement; tasks/get tells how the task really ended.
        await in_thread(calls.task_cancel, owner=owner, task_id=params.task_id)
        return {}
    # 2025-11-25: the receiver moves the task to cancelled before it answers. The
    # tool stops cooperatively (or is stopped at the end of the grace period),
    # so the answer waits for the job's real end, bounded, and tells it.
    doc = await in_thread(calls.legacy_task_cancel, owner=owner, task_id=params.task_id)
    if doc["status"] == "working":
        with anyio.move_on_after(settings.AGENTSITE_JOB_STOP_GRACE_S + CANCEL_SETTLE_S):
            job = await task_finished(owner=owner, task_id=params.task_id)
            doc = mapping.legacy_task_doc(job)
    return doc


async def tasks_update(ctx: Ctx, params: TaskUpdateParams) -> HandlerResult:
    """No agentsite task asks for input, so there is never an outstanding request to answer."""
    require_era(ctx, modern=True)
    require_tasks_extension(ctx)
    await in_thread(calls.task_job, owner=request_owner(ctx), task_id=params.task_id)
    return {}


async def tasks_result(ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    """2025-11-25: wait until the task is terminal, then answer what the call would have."""
    require_era(ctx, modern=False)
    owner = request_owner(ctx)
    await in_thread(calls.task_job, owner=owner, task_id=params.task_id)
    job = await task_finished(owner=owner, task_id=params.task_id)
    return {**mapping.job_tool_result(job), "_meta": mapping.related_task_meta(job)}


async def tasks_list(ctx: Ctx, params: types.PaginatedRequestParams) -> HandlerResult:
    require_era(ctx, modern=False)
    return await in_thread(calls.legacy_task_list, owner=request_owner(ctx), cursor=params.cursor)


async def subscriptions_listen(
    ctx: Ctx, params: types.SubscriptionsListenRequestParams
) -> types.SubscriptionsListenResult:
    """A listen stream; ``taskIds`` (tasks extension) streams ``notifications/tasks``.

    The stream ends gracefully once every listened task is terminal, unless other
    notification kinds were asked for too (the tool list never changes, so those
    streams stay open until the client leaves).
    """
    owner = request_owner(ctx)
    requested = params.notifications
    task_ids = (requested.model_extra or {}).get("taskIds")
    if task_ids is not None:
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise MCPError(types.INVALID_PARAMS, "notifications.taskIds must be a list of task ids")
        require_tasks_extension(ctx)
    owned = await in_thread(calls.owned_task_ids, owner=owner, task_ids=task_ids or [])
    other_kinds = {
        "toolsListChanged": requested.tools_list_changed,
        "promptsListChanged": requested.prompts_list_changed,
        "resourcesListChanged": requested.resources_list_changed,
        "resourceSubscriptions": requested.resource_subscriptions or None,
    }
    honored: dict[str, Any] = {key: value for key, value in other_kinds.items() if value}
    if task_ids is not None:
        honored["taskIds"] = owned
    meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
    await ctx.session.send_notification(
        types.SubscriptionsAcknowledgedNotification(
            params=types.SubscriptionsAcknowledgedNotificationParams(
                notifications=types.SubscriptionFilter.model_validate(honored), _meta=meta
            )
        ),
        related_request_id=ctx.request_id,
    )
    if owned:
        async for job in task_changes(owner=owner, task_ids=owned):
            notification = TasksNotification(
                params=TasksNotificationParams.model_validate(
                    {**mapping.task_doc(job), "_meta": meta}
                )
            )
            await ctx.session.send_notification(
                notification,  # type: ignore[arg-type]
                related_request_id=ctx.request_id,
            )
    if any(other_kinds.values()) or task_ids is None:
        await anyio.sleep_forever()
    return types.SubscriptionsListenResult(_meta=meta)


# --- the server ----------------------------------------------------------------------------


@asynccontextmanager
async def server_lifespan(server: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    """Background work that outlives one request: pushing task status to 2025 sessions."""
    async with anyio.create_task_group() as watchers:
        yield {"watchers": watchers}
        watchers.cancel_scope.cancel()


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
        lifespan=server_lifespan,
    )
    handlers: list[tuple[str, type[Any], Callable[[Ctx, Any], Awaitable[HandlerResult]]]] = [
        ("tools/list", types.PaginatedRequestParams, list_tools),
        ("tools/call", types.CallToolRequestParams, call_tool),
        ("subscriptions/listen", types.SubscriptionsListenRequestParams, subscriptions_listen),
        ("tasks/get", TaskIdParams, tasks_get),
        ("tasks/cancel", TaskIdParams, tasks_cancel),
        ("tasks/update", TaskUpdateParams, tasks_update),
        ("tasks/result", TaskIdParams, tasks_result),
        ("tasks/list", types.PaginatedRequestParams, tasks_list),
    ]
    for method, params_type, handler in handlers:
        server.add_request_handler(method, params_type, handler)
    server.middleware.extend([internal_errors_as_jsonrpc, legacy_task_augmented_calls])
    server.extensions = {mapping.TASKS_EXTENSION: {}}
    return server
