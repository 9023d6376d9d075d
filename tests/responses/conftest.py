"""Responses-API test setup: a real daphne and the real workers, driven by the openai SDK.

The SDK is pointed at ``<daphne>/v1`` with a test user's agentsite API token as
its API key, exactly as a user would configure it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from openai import OpenAI

from accounts.models import ApiToken
from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_serve


@pytest.fixture(scope="session")
def responses_url(processes: Processes) -> str:
    """The base URL of the Responses API on a daphne serving the test database."""
    return f"{daphne_serve(processes, name='responses-daphne')}/v1"


@pytest.fixture
def client_for(responses_url: str, rq_workers: Processes) -> Callable[[Any], OpenAI]:
    """An openai SDK client acting as ``user`` (the workers are running behind it)."""

    def make(user: Any) -> OpenAI:
        _, raw = ApiToken.issue(user=user, name="openai-sdk")
        return OpenAI(base_url=responses_url, api_key=raw, max_retries=0, timeout=60)

    return make


@pytest.fixture
def client(client_for: Callable[[Any], OpenAI], user: Any) -> OpenAI:
    return client_for(user)
