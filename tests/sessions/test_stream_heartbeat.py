"""An idle SSE stream sends comment heartbeats, driven through the real ASGI application."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async

from agentsite.asgi import application
from tests.asgi_scope import http_scope
from tests.conftest import api_client_for
from tests.sessions.test_stream_clients import make_session

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_idle_stream_sends_heartbeat_comments(user: Any, settings: Any) -> None:
    settings.AGENTSITE_SSE_HEARTBEAT_S = 0.2
    session = await make_session(user, events=1)
    raw = (await database_sync_to_async(api_client_for)(user)).raw_token
    path = f"/api/sessions/{session.id}/stream"
    scope = http_scope(
        path, [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {raw}".encode())]
    )
    http = ApplicationCommunicator(application, scope)
    await http.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await http.receive_output(10)
    assert start["status"] == 200
    body = ""
    while body.count(": heartbeat") < 3:
        message = await http.receive_output(10)
        body += message.get("body", b"").decode()
    assert '"seq":1' in body
    await http.send_input({"type": "http.disconnect"})
    await http.wait(5)
