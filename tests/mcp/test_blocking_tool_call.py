from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from tests.mcp.client import TasksExtension, connect

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_blocking_tool_answers_the_call_directly(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> tuple[Any, Any]:
        async with connect(mcp_url, token, extensions=[TasksExtension()]) as client:
            now = await client.call_tool("now", {})
            readme = await client.call_tool("read_file", {"path": "README.md"})
            return now, readme

    now, readme = anyio.run(scenario)

    assert now.is_error is False
    assert now.structured_content["utc"].endswith("Z")
    assert now.content[0].type == "text"
    assert readme.is_error is False
    assert readme.structured_content["path"] == "README.md"
