"""Another user's taskId is not found, whatever is asked of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.mcp.client import (
    TasksExtension,
    cancel_task,
    connect,
    get_task,
    listen_to_tasks,
    start_task,
    wait_for_terminal,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_another_users_task_is_not_found(
    served: str, user: Any, other_user: Any, token_for: Callable[[Any], str]
) -> None:
    alice, mallory = token_for(user), token_for(other_user)

    async def scenario() -> tuple[list[MCPError], dict[str, Any], dict[str, Any]]:
        async with connect(served, alice, extensions=[TasksExtension()]) as client:
            created = await start_task(client, "mcp_nap", {"seconds": 0})
            task_id = created.task_id
        errors: list[MCPError] = []
        tasks = TasksExtension()
        async with connect(served, mallory, extensions=[tasks]) as intruder:
            for ask in (get_task, cancel_task):
                try:
                    await ask(intruder.session, task_id)
                except MCPError as exc:
                    errors.append(exc)
            closed = await listen_to_tasks(intruder.session, [task_id])
        async with connect(served, alice, extensions=[TasksExtension()]) as client:
            own = await wait_for_terminal(client.session, task_id)
        assert tasks.notifications_seen == []
        return errors, closed, own

    errors, closed, own = anyio.run(scenario)

    assert [e.error.code for e in errors] == [-32602, -32602]
    assert all("Task not found" in e.error.message for e in errors)
    assert closed["resultType"] == "complete"
    assert own["status"] == "completed"
