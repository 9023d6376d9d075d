"""MCP test setup: a real daphne serving agentsite (and /mcp) against the test database.

The web server and the RQ workers import the MCP test tools (named in
tests/environment.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from accounts.models import ApiToken
from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_serve


@pytest.fixture(scope="session")
def mcp_url(processes: Processes) -> str:
    """The /mcp URL of a daphne started the way `manage.py serve` starts it."""
    return f"{daphne_serve(processes, name='mcp-daphne')}/mcp"


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
