"""tasks/cancel (2026-07-28) acknowledges; the task ends as the job really ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from tests.mcp.client import (
    TasksExtension,
    cancel_task,
    connect,
    get_task,
    start_task,
    wait_for_terminal,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancelling_a_running_task_ends_it_cancelled(
    served: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with connect(served, token, extensions=[TasksExtension()]) as client:
            created = await start_task(client, "mcp_nap", {"seconds": 60})
            with anyio.fail_after(30):
                while True:
                    running = await get_task(client.session, created.task_id)
                    if running["statusMessage"].startswith("napped "):
                        break
                    await anyio.sleep(0.1)
            ack = await cancel_task(client.session, created.task_id)
            final = await wait_for_terminal(client.session, created.task_id)
            return running, ack, final

    running, ack, final = anyio.run(scenario)

    assert running["status"] == "working"
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
    assert final["status"] == "cancelled"
    assert "result" not in final and "error" not in final


def test_cancelling_a_task_that_already_completed_leaves_it_completed(
    served: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connect(served, token, extensions=[TasksExtension()]) as client:
            created = await start_task(client, "mcp_nap", {"seconds": 0})
            await wait_for_terminal(client.session, created.task_id)
            ack = await cancel_task(client.session, created.task_id)
            return ack, await get_task(client.session, created.task_id)

    ack, after = anyio.run(scenario)

    assert ack["resultType"] == "complete"
    assert after["status"] == "completed"
    assert after["result"]["structuredContent"]["summary"] == "napped 0s"
