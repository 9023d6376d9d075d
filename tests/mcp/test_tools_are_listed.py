from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from jobs.registry import all_tools
from tests.mcp.client import TASKS, connect

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_official_client_lists_every_tool_with_its_schema(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    token = token_for(user)

    async def scenario() -> tuple[str, Any, Any]:
        async with connect(mcp_url, token) as client:
            return client.protocol_version, client.server_capabilities, await client.list_tools()

    version, capabilities, listing = anyio.run(scenario)

    assert version == "2026-07-28"
    assert capabilities.extensions == {TASKS: {}}
    listed = {tool.name: tool for tool in listing.tools}
    builtin = {"run_tests", "crawl_site", "write_report", "read_file", "list_files", "http_get"}
    assert builtin | {"now"} <= set(listed)
    for tool in all_tools():
        assert listed[tool.name].input_schema == tool.input_schema()
        assert listed[tool.name].description == tool.description
        expected = "required" if tool.kind == "async" else "forbidden"
        assert listed[tool.name].meta == {"agentsite/taskSupport": expected}
