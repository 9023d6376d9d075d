"""The tasks extension (2026-07-28): create, poll, result inline, notifications pushed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from tests.mcp.client import (
    CreateTaskResult,
    TasksExtension,
    connect,
    listen_to_tasks,
    start_task,
    wait_for_terminal,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_async_tool_becomes_a_task_that_completes_with_its_result_inline(
    served: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)
    tasks = TasksExtension()

    async def scenario() -> tuple[Any, dict[str, Any], dict[str, Any]]:
        async with connect(served, token, extensions=[tasks]) as client:
            created = await start_task(client, "mcp_nap", {"seconds": 1.0})
            assert isinstance(created, CreateTaskResult)
            closed: dict[str, Any] = {}

            async def listen() -> None:
                closed.update(await listen_to_tasks(client.session, [created.task_id]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(listen)
                final = await wait_for_terminal(client.session, created.task_id)
            return created, final, closed

    created, final, closed = anyio.run(scenario)

    assert created.task_id.startswith("job_")
    assert created.status == "working"
    assert created.ttl_ms and created.ttl_ms > 0
    assert created.poll_interval_ms == 1000
    assert final["status"] == "completed"
    assert final["resultType"] == "complete"
    assert final["statusMessage"] == "napped 1s"
    assert final["result"]["isError"] is False
    assert final["result"]["structuredContent"] == {"summary": "napped 1s", "seconds": 1.0}
    assert "napped 1s" in final["result"]["content"][0]["text"]

    # The listen stream pushed progress while working, then the terminal task, then closed.
    seen = tasks.notifications_seen
    assert all(n["taskId"] == created.task_id for n in seen)
    working = [n for n in seen if n["status"] == "working"]
    progress = [n for n in working if n["statusMessage"].startswith("napped ")]
    assert progress
    assert progress[-1]["lastUpdatedAt"] > created.created_at  # progress is an update
    assert seen[-1]["status"] == "completed"
    assert seen[-1]["result"] == final["result"]
    assert closed["resultType"] == "complete"


def test_the_client_resolves_a_task_into_the_tool_result(
    served: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> Any:
        async with connect(served, token, extensions=[TasksExtension()]) as client:
            return await client.call_tool("mcp_nap", {"seconds": 0.2})

    result = anyio.run(scenario)

    assert result.is_error is False
    assert result.structured_content == {"summary": "napped 0.2s", "seconds": 0.2}


def test_a_tool_that_raises_ends_failed_with_the_reason(
    served: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> dict[str, Any]:
        async with connect(served, token, extensions=[TasksExtension()]) as client:
            created = await start_task(client, "mcp_broken", {})
            return await wait_for_terminal(client.session, created.task_id)

    final = anyio.run(scenario)

    assert final["status"] == "failed"
    assert "the nap went wrong" in final["statusMessage"]
    assert final["error"]["code"] == -32603
    assert "result" not in final
