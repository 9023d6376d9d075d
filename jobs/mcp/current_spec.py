"""Tasks at protocol 2026-07-28: the ``io.modelcontextprotocol/tasks`` extension.

Each request is self-contained (a per-request envelope, no session).
``tools/call`` of an async tool answers a ``CreateTaskResult``
(``resultType: "task"``) to a client that declared the extension on that
request, ``-32021`` otherwise; ``tasks/get`` carries the result inline once
terminal; ``tasks/cancel`` is an acknowledgement; ``tasks/update`` answers
nothing outstanding; ``subscriptions/listen`` with ``taskIds`` streams
``notifications/tasks``.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import anyio
import mcp_types as types
from django.contrib.auth.models import AbstractBaseUser
from mcp.server.context import HandlerResult
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from pydantic import ConfigDict

from jobs import registry
from jobs.mcp import calls, mapping
from jobs.mcp.request_context import (
    Ctx,
    TaskIdParams,
    in_thread,
    rejected_input_result,
    request_owner,
)
from jobs.mcp.watch import task_changes


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


def declares_tasks_extension(ctx: Ctx) -> bool:
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and mapping.TASKS_EXTENSION in extensions  # type: ignore[operator]


def require_tasks_extension(ctx: Ctx) -> None:
    if not declares_tasks_extension(ctx):
        raise MCPError(
            mapping.MISSING_CAPABILITY,
            "Missing required client capability",
            mapping.missing_capability_data(),
        )


async def task_call(
    ctx: Ctx, *, owner: AbstractBaseUser, tool: registry.Tool, args: dict[str, Any]
) -> HandlerResult:
    """``tools/call`` of an async tool: its job started, answered as a task."""
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


async def tasks_get(ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    owner = request_owner(ctx)
    require_tasks_extension(ctx)
    return await in_thread(calls.task_doc, owner=owner, task_id=params.task_id)


async def tasks_cancel(ctx: Ctx, params: TaskIdParams) -> HandlerResult:
    owner = request_owner(ctx)
    require_tasks_extension(ctx)
    # Cooperative: an acknowledgement; tasks/get tells how the task really ended.
    await in_thread(calls.task_cancel, owner=owner, task_id=params.task_id)
    return {}


async def tasks_update(ctx: Ctx, params: TaskUpdateParams) -> HandlerResult:
    """No agentsite task asks for input, so there is never an outstanding request to answer."""
    require_tasks_extension(ctx)
    await in_thread(calls.task_job, owner=request_owner(ctx), task_id=params.task_id)
    return {}


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
