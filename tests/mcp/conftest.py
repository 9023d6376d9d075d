"""MCP test setup: a real daphne serving agentsite (and /mcp) against the test database.

The web server and the RQ workers import the MCP test tools (named in
tests/environment.py).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agentsite.core.embedded_redis import free_port
from agentsite.models import ApiToken
from tests.conftest import ARTIFACTS, BASE_DIR, Processes, subprocess_env


@pytest.fixture(scope="session")
def mcp_url(processes: Processes) -> str:
    """The /mcp URL of a daphne started the way `manage.py serve` starts it."""
    port = free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / "mcp-daphne.log", "ab")
    argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(
        [*argv, "agentsite.asgi:application"],
        cwd=BASE_DIR,
        env=subprocess_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    processes.procs.append(proc)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.post(url, json={}, timeout=2)
            return url
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("daphne did not start; see test-artifacts/") from None
            time.sleep(0.1)


@pytest.fixture
def token_for(db: None) -> Callable[[Any], str]:
    """A fresh raw API token for a user."""

    def issue(user: Any) -> str:
        _, raw = ApiToken.issue(user=user, name="mcp")
        return raw

    return issue


@pytest.fixture
def served(mcp_url: str, rq_workers: Processes) -> Iterator[str]:
    """The MCP URL, with tool workers running behind it."""
    yield mcp_url
