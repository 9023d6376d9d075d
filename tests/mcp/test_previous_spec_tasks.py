"""The 2025-11-25 task flow, driven by the experimental tasks client of the mcp 1.x SDK.

The 1.x SDK lives in its own virtual environment, created on first use from PyPI
and cached under .agentsite/ by version.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.servers import client_venv

pytestmark = pytest.mark.django_db(transaction=True)

MCP1_VERSION = os.environ.get("AGENTSITE_TEST_MCP1_VERSION", "1.30.0")
SCRIPT = Path(__file__).with_name("previous_spec_client.py")


def mcp1_python() -> Path:
    """The interpreter of a virtual environment holding mcp==MCP1_VERSION."""
    return client_venv(f"mcp1-venv-{MCP1_VERSION}", f"mcp=={MCP1_VERSION}")


@pytest.mark.timeout(900)
def test_the_mcp1_tasks_client_runs_the_previous_task_flow(
    served: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    python = mcp1_python()
    run = subprocess.run(
        [str(python), str(SCRIPT), served, token_for(user)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    first, waited, long = seen["ids"]

    assert seen["protocol_version"] == "2025-11-25"
    assert seen["capabilities_tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    assert seen["task_support"]["mcp_nap"] == "required"
    assert seen["task_support"]["now"] == "forbidden"

    # call_tool_as_task → CreateTaskResult {task: {...}}
    created = seen["created"]
    assert created["taskId"] == first and created["status"] == "working"
    assert created["ttl"] > 0 and created["pollInterval"] == 1000
    assert created["createdAt"] and created["lastUpdatedAt"] and created["statusMessage"]

    # get_task until terminal, then get_task_result answers what the call would have.
    assert seen["polled_statuses"][-1] == "completed"
    assert seen["final"]["statusMessage"] == "napped 1s"
    expected = {"summary": "napped 1s", "seconds": 1.0}
    for result, task_id in ((seen["result"], first), (seen["blocked_result"], waited)):
        assert result["isError"] is False
        assert result["structuredContent"] == expected
        assert result["_meta"] == {"io.modelcontextprotocol/related-task": {"taskId": task_id}}

    # cancel_task answers the task once it really ended: cancelled (the 2025-11-25
    # revision has the receiver move it to cancelled before answering).
    assert seen["cancel_answer"]["taskId"] == long
    assert seen["cancel_answer"]["status"] == "cancelled"
    assert seen["cancelled_final"]["status"] == "cancelled"

    # list_tasks: the caller's own tasks, newest first.
    assert seen["listed"] == [long, waited, first]
    assert seen["listed_next_cursor"] is None

    assert seen["cancel_terminal_code"] == -32602
    assert seen["unknown_task_code"] == -32602
    assert seen["untasked_async_call_code"] == -32601
    assert seen["tasked_blocking_call_code"] == -32601
    assert seen["now"]["utc"].endswith("Z")

    # notifications/tasks/status pushed on the session's stream, through to the end.
    pushed = seen["notifications"]
    for task_id, final in ((first, "completed"), (waited, "completed"), (long, "cancelled")):
        statuses = [n["status"] for n in pushed if n["taskId"] == task_id]
        assert statuses and statuses[-1] == final
    assert any(n["statusMessage"].startswith("napped ") for n in pushed)
