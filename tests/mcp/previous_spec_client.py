# mypy: ignore-errors
# (This file runs under the mcp 1.x SDK; the project's type checking sees 2.x.)
"""Drives agentsite's MCP endpoint with the experimental tasks client of the mcp 1.x SDK.

Runs inside its own virtual environment (the 1.x and 2.x SDKs cannot share one),
so it imports nothing from agentsite. Usage: ``python previous_spec_client.py URL TOKEN``.
Prints one JSON object with everything it observed; the test makes the assertions.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


async def error_code(call: Any) -> int | None:
    try:
        await call
    except McpError as exc:
        return exc.error.code
    return None


async def wait_until(session: ClientSession, task_id: str, *statuses: str) -> types.GetTaskResult:
    with anyio.fail_after(60):
        while True:
            task = await session.experimental.get_task(task_id)
            if task.status in statuses:
                return task
            await anyio.sleep(0.1)


async def scenario(url: str, token: str) -> dict[str, Any]:
    seen: dict[str, Any] = {"notifications": []}

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.TaskStatusNotification
        ):
            seen["notifications"].append(message.root.params.model_dump(mode="json"))

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        streamablehttp_client(url, headers=headers) as (read, write, _),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        init = await session.initialize()
        seen["protocol_version"] = init.protocolVersion
        seen["capabilities_tasks"] = init.capabilities.model_dump(mode="json")["tasks"]
        tools = await session.list_tools()
        seen["task_support"] = {
            tool.name: tool.execution.taskSupport if tool.execution else None
            for tool in tools.tools
        }

        created = await session.experimental.call_tool_as_task("mcp_nap", {"seconds": 1})
        seen["created"] = created.task.model_dump(mode="json")
        task_id = created.task.taskId
        statuses = []
        async for status in session.experimental.poll_task(task_id):
            statuses.append(status.status)
        seen["polled_statuses"] = statuses
        seen["final"] = (await session.experimental.get_task(task_id)).model_dump(mode="json")
        result = await session.experimental.get_task_result(task_id, types.CallToolResult)
        seen["result"] = result.model_dump(mode="json", by_alias=True)

        # tasks/result blocks until the task is terminal.
        waiting = await session.experimental.call_tool_as_task("mcp_nap", {"seconds": 1})
        blocked = await session.experimental.get_task_result(
            waiting.task.taskId, types.CallToolResult
        )
        seen["blocked_result"] = blocked.model_dump(mode="json", by_alias=True)

        long = await session.experimental.call_tool_as_task("mcp_nap", {"seconds": 60})
        await wait_until(session, long.task.taskId, "working")
        with anyio.fail_after(30):
            while not (
                await session.experimental.get_task(long.task.taskId)
            ).statusMessage.startswith("napped"):
                await anyio.sleep(0.1)
        cancelled = await session.experimental.cancel_task(long.task.taskId)
        seen["cancel_answer"] = cancelled.model_dump(mode="json")
        ended = await wait_until(session, long.task.taskId, "cancelled", "completed", "failed")
        seen["cancelled_final"] = ended.model_dump(mode="json")

        listed = await session.experimental.list_tasks()
        seen["listed"] = [task.taskId for task in listed.tasks]
        seen["listed_next_cursor"] = listed.nextCursor
        seen["ids"] = [task_id, waiting.task.taskId, long.task.taskId]

        seen["cancel_terminal_code"] = await error_code(session.experimental.cancel_task(task_id))
        seen["unknown_task_code"] = await error_code(
            session.experimental.get_task("job_0000000000000000")
        )
        seen["untasked_async_call_code"] = await error_code(
            session.call_tool("mcp_nap", {"seconds": 0})
        )
        seen["tasked_blocking_call_code"] = await error_code(
            session.experimental.call_tool_as_task("now", {})
        )
        now = await session.call_tool("now", {})
        seen["now"] = now.structuredContent
        await anyio.sleep(0.5)  # let the last status notifications arrive
    return seen


def main() -> None:
    # The 1.x SDK marks its tasks client deprecated: tasks moved to an extension in 2026.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    url, token = sys.argv[1], sys.argv[2]
    print(json.dumps(anyio.run(scenario, url, token)))


if __name__ == "__main__":
    main()
