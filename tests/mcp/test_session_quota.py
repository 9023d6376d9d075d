"""Each user may hold a share of the MCP sessions, so one user cannot lock the others out.

Before: one user opening sessions (about 10,000 in a minute) filled the process's
session table, and every other user's ``initialize`` got ``503 Too many open
sessions``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from accounts.models import UserQuota
from jobs.models import Job
from tests.conftest import Processes, wait_until
from tests.mcp.client import TasksExtension, connect, start_task
from tests.sessions.test_stream_clients import daphne_running

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "quota-test", "version": "1"},
    },
}


def initialize(url: str, token: str) -> httpx.Response:
    return httpx.post(
        url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=10
    )


def close(url: str, token: str, session_id: str) -> None:
    headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id}
    assert httpx.delete(url, headers=headers, timeout=10).status_code in (200, 204)


def test_a_user_at_its_session_limit_is_refused_while_others_still_initialize(
    mcp_url: str, user: Any, other_user: Any, token_for: Callable[[Any], str]
) -> None:
    UserQuota.objects.create(user=user, mcp_sessions=3)
    alice, bob = token_for(user), token_for(other_user)
    opened = [initialize(mcp_url, alice) for _ in range(3)]
    assert [r.status_code for r in opened] == [200, 200, 200]

    refused = initialize(mcp_url, alice)
    theirs = initialize(mcp_url, bob)

    assert refused.status_code == 429, refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    error = refused.json()["error"]
    assert error["code"] == -32029 and error["data"]["code"] == "quota_exceeded"
    assert "limit of 3 open MCP sessions" in error["message"]
    assert theirs.status_code == 200 and theirs.headers["mcp-session-id"]

    # Closing a session gives its place back.
    close(mcp_url, alice, opened[0].headers["mcp-session-id"])
    assert initialize(mcp_url, alice).status_code == 200
    for response in [*opened[1:], theirs]:
        token = bob if response is theirs else alice
        close(mcp_url, token, response.headers["mcp-session-id"])


@pytest.fixture(scope="module")
def small_mcp_url(processes: Processes) -> Iterator[str]:
    """A web process with room for four MCP sessions, three of them per user."""
    env = {"AGENTSITE_MCP_MAX_SESSIONS": "4", "AGENTSITE_QUOTA_MCP_SESSIONS": "3"}
    with daphne_running(processes, name="mcp-small-daphne", env=env) as url:
        yield f"{url}/mcp"


@pytest.fixture(scope="module")
def idle_mcp_url(processes: Processes) -> Iterator[str]:
    """A web process that closes MCP sessions idle for a second, one open per user."""
    env = {"AGENTSITE_QUOTA_MCP_IDLE_S": "1", "AGENTSITE_QUOTA_MCP_SESSIONS": "1"}
    with daphne_running(processes, name="mcp-idle-daphne", env=env) as url:
        yield f"{url}/mcp"


def test_one_user_cannot_fill_the_processs_sessions(
    small_mcp_url: str, user: Any, other_user: Any, token_for: Callable[[Any], str]
) -> None:
    alice, bob = token_for(user), token_for(other_user)

    statuses = [initialize(small_mcp_url, alice).status_code for _ in range(10)]
    theirs = initialize(small_mcp_url, bob)

    assert statuses == [200] * 3 + [429] * 7
    assert theirs.status_code == 200, theirs.text


def test_an_idle_session_is_closed_and_gives_its_place_back(
    idle_mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    alice = token_for(user)
    first = initialize(idle_mcp_url, alice)
    assert first.status_code == 200
    assert initialize(idle_mcp_url, alice).status_code == 429
    session = {
        "Authorization": f"Bearer {alice}",
        "Mcp-Session-Id": first.headers["mcp-session-id"],
    }

    # Closed once idle (asking about it would keep it busy): the user may open another,
    # and the old id is not found any more.
    second = wait_until(
        lambda: (r := initialize(idle_mcp_url, alice)).status_code == 200 and r,
        timeout=30,
        interval=0.2,
    )
    assert second.headers["mcp-session-id"] != first.headers["mcp-session-id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    gone = httpx.post(idle_mcp_url, json=ping, headers={**HEADERS, **session}, timeout=10)
    assert gone.status_code == 404


def test_a_task_over_the_live_jobs_limit_is_a_jsonrpc_error(
    mcp_url: str, user: Any, token_for: Callable[[Any], str]
) -> None:
    UserQuota.objects.create(user=user, live_jobs=1)
    Job.objects.create(owner=user, tool="mcp_nap", args={"seconds": 1}, timeout_s=60)
    alice = token_for(user)

    async def scenario() -> MCPError:
        async with connect(mcp_url, alice, extensions=[TasksExtension()]) as client:
            with pytest.raises(MCPError) as refused:
                await start_task(client, "mcp_nap", {"seconds": 0})
            return refused.value

    error = anyio.run(scenario)

    assert error.error.code == -32029
    assert error.error.data["code"] == "quota_exceeded"
    assert error.error.data["retry_after_s"] >= 1
    assert Job.objects.filter(owner=user).count() == 1
