"""A client that did not declare io.modelcontextprotocol/tasks never gets a task."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from jobs.models import Job
from tests.mcp.client import TASKS, connect, get_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_async_tool_answers_missing_required_client_capability(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> list[MCPError]:
        errors: list[MCPError] = []
        async with connect(mcp_url, token) as client:
            for attempt in (
                client.call_tool("mcp_nap", {"seconds": 0}),
                get_task(client.session, "job_0000000000000000"),
            ):
                try:
                    await attempt
                except MCPError as exc:
                    errors.append(exc)
        return errors

    errors = anyio.run(scenario)

    assert [e.error.code for e in errors] == [-32021, -32021]
    for error in errors:
        assert error.error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert not Job.objects.exists()
