"""A2A test setup: a real daphne and the real workers, driven by the a2a-sdk client.

The client finds the agent from its card at ``/.well-known/agent-card.json`` and
speaks the binding a test asks for, with a test user's agentsite API token as
its Bearer token, exactly as another agent would be configured.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client

from accounts.models import ApiToken
from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_serve

T = TypeVar("T")
BINDINGS = ("JSONRPC", "HTTP+JSON")


@pytest.fixture(scope="session")
def a2a_url(processes: Processes) -> str:
    """The base URL of a daphne serving the test database (the card is at its root)."""
    return daphne_serve(processes, name="a2a-daphne")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def token_for(user: Any) -> str:
    _, raw = ApiToken.issue(user=user, name="a2a-client")
    return raw


@asynccontextmanager
async def a2a_client(
    url: str, token: str, binding: str = "JSONRPC", streaming: bool = True
) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        config = ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
        )
        client = await create_client(url, client_config=config)
        try:
            yield client
        finally:
            await client.close()


@pytest.fixture
def client_of(a2a_url: str, rq_workers: Processes) -> Callable[..., Any]:
    """``client_of(user, binding=…)``: an async context manager for an a2a-sdk client."""

    def make(user: Any, binding: str = "JSONRPC", streaming: bool = True) -> Any:
        return a2a_client(a2a_url, token_for(user), binding, streaming)

    return make
