"""A client that cannot keep up is cut off (4429) and resumes from its last token."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path

from sessions.consumers import SessionConsumer
from tests.sessions.test_stream_clients import (
    append,
    communicator,
    connect,
    cookie_for,
    frames_until,
    make_session,
)

pytestmark = pytest.mark.django_db(transaction=True)


class SlowSocketConsumer(SessionConsumer):
    """The real consumer behind a socket that drains one frame every 50 ms."""

    live_queue_max = 8

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        await asyncio.sleep(0.05)
        await super().send(text_data, bytes_data, close)


slow_app = AllowedHostsOriginValidator(
    AuthMiddlewareStack(
        URLRouter([path("ws/sessions/<str:session_id>/", SlowSocketConsumer.as_asgi())])
    )
)


async def test_a_slow_client_is_disconnected_and_resumes_without_loss(user: Any) -> None:
    session = await make_session(user)
    cookie = await cookie_for(user)
    slow = communicator(session.id, headers=[cookie], app=slow_app)
    await connect(slow)

    for i in range(60):
        await append(session_id=session.id, kind="assistant_delta", payload={"text": f"<{i + 1}>"})

    received: list[dict[str, Any]] = []
    while True:
        message = await slow.receive_output(20)
        if message["type"] == "websocket.close":
            assert message["code"] == 4429
            break
        received.append(json.loads(message["text"]))
    assert len(received) < 60
    assert [f["seq"] for f in received] == list(range(1, len(received) + 1))

    after = received[-1]["token"] if received else ""
    resumed = communicator(session.id, headers=[cookie], after=after)
    await connect(resumed)
    rest = await frames_until(resumed, 60)
    assert [f["seq"] for f in rest] == list(range(len(received) + 1, 61))
    await resumed.disconnect()
