"""Tasks at protocol 2025-11-25: the core tasks of the initialize handshake.

Tasks are a server capability; ``tools/call`` carries ``params.task``;
``tasks/get``, ``tasks/result``, ``tasks/list`` and ``tasks/cancel``; and
``notifications/tasks/status`` on the session's stream, pushed by watchers that
outlive the request that started the task.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import anyio
import mcp_types as types
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from jobs import registry
from jobs.mcp import calls, mapping
from jobs.mcp.request_context import (
    Ctx,
    TaskIdParams,
    in_thread,
    is_current_spec,
    request_owner,
)
from jobs.mcp.watch import task_changes, task_finished

logger = logging.getLogger(__name__)

# Beyond the stop grace period: the forced stop and its record.
CANCEL_SETTLE_S = 5.0


def tasks_capability() -> types.ServerTasksCapability:
    """2025-11-25 declares tasks as a core capability."""
    return types.ServerTasksCapability(
        list=types.TasksListCapability(),
        cancel=types.TasksCancelCapability(),
        requests=types.ServerTasksRequestsCapability(
            tools=types.TasksToolsCapability(call=types.TasksCallCapability())
        ),
    )


@asynccontextmanager
async def status_watchers(server: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    """The server's lifespan: the task group that pushes task status to sessions."""
    async with anyio.create_task_group() as watchers:
        yield {"watchers": watchers}
        watchers.cancel_scope.cancel()


def call_without_task(tool: registry.Tool) -> NoReturn:
    """An async tool called without ``params.task``."""
    raise MCPError(
        types.METHOD_NOT_FOUND,
        f"Tool {tool.name!r} runs as a task: call it with params.task",
    )


async def task_augmented_calls(ctx: Ctx, call_next: CallNext) -> HandlerResult:
    """Serve a 2025-11-25 ``tools/call`` that carries ``params.task``.

    Runs as middleware because the SDK shapes every ``tools/call`` result into a
    ``CallToolResult`` for handshake-era versions, and a ``CreateTaskResult`` is not one.
    """
    raw = ctx.params
    if (
        ctx.method != "tools/call"
        or is_current_spec(ctx)
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
        push_task_status, ctx, owner, job.id, mapping.observed_state(job)
    )
    return {"task": mapping.legacy_task_doc(job)}


async def push_task_status(
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


async def tasks_get(ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    owner = request_owner(ctx)
    return await in_thread(calls.legacy_task_doc, owner=owner, task_id=params.task_id)


async def tasks_cancel(ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    """The receiver moves the task to cancelled before it answers.

    The tool stops cooperatively (or is stopped at the end of the grace period),
    so the answer waits for the job's real end, bounded, and tells it.
    """
    owner = request_owner(ctx)
    doc = await in_thread(calls.legacy_task_cancel, owner=owner, task_id=params.task_id)
    if doc["status"] == "working":
        with anyio.move_on_after(settings.AGENTSITE_JOB_STOP_GRACE_S + CANCEL_SETTLE_S):
            job = await task_finished(owner=owner, task_id=params.task_id)
            doc = mapping.legacy_task_doc(job)
    return doc


async def tasks_result(ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    """Wait until the task is terminal, then answer what the call would have."""
    owner = request_owner(ctx)
    await in_thread(calls.task_job, owner=owner, task_id=params.task_id)
    job = await task_finished(owner=owner, task_id=params.task_id)
    return {**mapping.job_tool_result(job), "_meta": mapping.related_task_meta(job)}


async def tasks_list(ctx: Ctx, params: types.PaginatedRequestParams) -> HandlerResult:
    return await in_thread(calls.legacy_task_list, owner=request_owner(ctx), cursor=params.cursor)
