"""The client side of the tasks extension for the official mcp 2.x client.

The SDK has the extension seams (claims, notification bindings, custom requests)
but no tasks extension of its own; this is the smallest one that drives it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.extension import (
    ClaimContext,
    ClientExtension,
    NotificationBinding,
    ResultClaim,
)
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"


class CreateTaskResult(types.Result):
    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class AnyResult(types.Result):
    model_config = ConfigDict(extra="allow")


class TaskIdParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class Listen(
    types.Request[types.SubscriptionsListenRequestParams, Literal["subscriptions/listen"]]
):
    method: Literal["subscriptions/listen"] = "subscriptions/listen"
    params: types.SubscriptionsListenRequestParams


class TaskNotificationParams(types.NotificationParams):
    model_config = ConfigDict(extra="allow")


class TasksExtension(ClientExtension):
    """Declares the extension, accepts ``resultType: "task"``, collects ``notifications/tasks``."""

    identifier = TASKS

    def __init__(self) -> None:
        self.notifications_seen: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._poll)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [
            NotificationBinding(
                method="notifications/tasks",
                params_type=TaskNotificationParams,
                handler=self._on_task,
            )
        ]

    async def _on_task(self, params: TaskNotificationParams) -> None:
        self.notifications_seen.append(params.model_dump(by_alias=True, exclude_none=True))

    async def _poll(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        task = await wait_for_terminal(ctx.session, created.task_id)
        return types.CallToolResult.model_validate(task["result"])


async def start_task(client: Client, tool: str, arguments: dict[str, Any]) -> CreateTaskResult:
    """``tools/call`` of an async tool, keeping the ``CreateTaskResult`` instead of resolving it."""
    created = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(created, CreateTaskResult), created
    return created


async def get_task(session: Any, task_id: str) -> dict[str, Any]:
    result = await session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), AnyResult)
    return result.model_dump(by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


async def cancel_task(session: Any, task_id: str) -> dict[str, Any]:
    result = await session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), AnyResult)
    return result.model_dump(by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


async def wait_for_terminal(session: Any, task_id: str, timeout: float = 60) -> dict[str, Any]:
    """Poll ``tasks/get`` at the advertised interval until the task is terminal."""
    with anyio.fail_after(timeout):
        while True:
            task = await get_task(session, task_id)
            if task["status"] != "working":
                return task
            await anyio.sleep(min(task.get("pollIntervalMs", 200), 200) / 1000)


async def listen_to_tasks(session: Any, task_ids: list[str]) -> dict[str, Any]:
    """Open a listen stream for ``task_ids``; returns once the server closes it."""
    request = Listen(
        params=types.SubscriptionsListenRequestParams(
            notifications=types.SubscriptionFilter.model_validate({"taskIds": task_ids})
        )
    )
    result = await session.send_request(request, AnyResult)
    return result.model_dump(by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


@asynccontextmanager
async def connect(
    url: str, token: str | None, *, extensions: list[ClientExtension] | None = None
) -> AsyncIterator[Client]:
    """An official mcp 2.x client over Streamable HTTP with a Bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120))
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, extensions=extensions, read_timeout_seconds=60) as client:
            yield client
