"""Blocking tools called over MCP run on a pool of their own, under their deadline.

A real daphne with a two-thread tool pool and a large generated workspace: more
slow blocking calls than there are threads, and a pathological glob, leave
another user's API request and SSE catch-up answering while they run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from sessions.events import event_append
from sessions.models import AgentSession
from tests.conftest import Processes, api_client_for, wait_until
from tests.mcp.client import connect
from tests.sessions.test_stream_clients import daphne_running, sse_events

pytestmark = pytest.mark.django_db(transaction=True)

HOLDS = 8
PATHOLOGICAL = "/".join(["**"] * 12) + "/*.nothing"


def large_workspace(root: Path) -> Path:
    for top in range(20):
        for sub in range(10):
            folder = root / f"pkg{top}" / f"mod{sub}" / "deep"
            folder.mkdir(parents=True)
            for name in range(10):
                (folder / f"file{name}.py").write_text("x = 1\n")
    return root


@pytest.fixture(scope="module")
def site(processes: Processes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workspace = large_workspace(tmp_path_factory.mktemp("large-workspace"))
    env = {"AGENTSITE_WORKSPACE": str(workspace), "AGENTSITE_BLOCKING_TOOL_THREADS": "2"}
    with daphne_running(processes, "daphne-blocking-pool", env=env) as url:
        yield url


def bearer(user: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_client_for(user).raw_token}"}  # type: ignore[attr-defined]


async def catch_up(base: str, session_id: str, headers: dict[str, str], count: int) -> list[Any]:
    """The first ``count`` events of a session's SSE stream (its replay)."""
    timeout = httpx.Timeout(60)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout) as http:
        async with http.stream("GET", f"/api/sessions/{session_id}/stream") as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            events: list[Any] = []
            buffered: list[str] = []
            async for line in lines:
                buffered.append(line)
                parsed = [e for e in sse_events(iter(buffered)) if e["data"] is not None]
                if len(parsed) >= count:
                    events = parsed[:count]
                    break
            return events


def test_slow_blocking_calls_leave_other_users_answered_and_end_at_their_deadline(
    site: str,
    user: Any,
    other_user: Any,
    token_for: Callable[[Any], str],
    tmp_path: Path,
) -> None:
    token = token_for(user)
    session = AgentSession.objects.create(owner=other_user)
    for i in range(3):
        event_append(session_id=session.id, kind="assistant_delta", payload={"text": f"<{i}>"})
    other = bearer(other_user)
    answers: dict[str, Any] = {}
    order: list[str] = []

    def started() -> int:
        return len(list(tmp_path.glob("*.started")))

    async def hold(client: Any, tag: str) -> None:
        args = {"marker_dir": str(tmp_path), "tag": tag}
        answers[tag] = await client.call_tool("mcp_hold", args)
        order.append(f"hold {tag}")

    async def pathological(client: Any, index: int) -> None:
        answers[f"glob{index}"] = await client.call_tool("list_files", {"pattern": PATHOLOGICAL})

    async def scenario() -> None:
        async with connect(f"{site}/mcp", token) as client:
            await pathological(client, -1)
            async with anyio.create_task_group() as group:
                for index in range(HOLDS):
                    group.start_soon(hold, client, f"h{index}")
                for index in range(4):
                    group.start_soon(pathological, client, index)
                while started() < 2:  # the pool is busy
                    await anyio.sleep(0.05)
                async with httpx.AsyncClient(base_url=site, headers=other, timeout=60) as http:
                    me = await http.get("/api/me")
                answers["me"] = me
                order.append("api answered")
                answers["sse"] = await catch_up(site, session.id, other, 3)
                order.append("sse answered")

    anyio.run(scenario)

    assert answers["me"].status_code == 200
    assert [e["data"]["payload"]["text"] for e in answers["sse"]] == ["<0>", "<1>", "<2>"]
    # Both answered while every slow call was still running.
    assert order[:2] == ["api answered", "sse answered"]
    for index in range(HOLDS):
        result = answers[f"h{index}"]
        assert result.is_error is True
        assert "mcp_hold did not finish within its 15s deadline" in result.content[0].text
    refused = answers["glob-1"]
    assert refused.is_error is True
    assert "the pattern has 12 '**' segments; at most 2 are allowed" in refused.content[0].text
    # Behind the holds, the same calls are refused or answered at their deadline.
    for index in range(4):
        late = answers[f"glob{index}"]
        assert late.is_error is True
        assert any(
            sentence in late.content[0].text
            for sentence in ("'**' segments", "list_files did not finish within its 10s deadline")
        )
    # The calls waiting for a thread never started; those that ran stopped by themselves.
    assert 2 <= started() < HOLDS
    wait_until(lambda: len(list(tmp_path.glob("*.stopped"))) == started(), timeout=30)
