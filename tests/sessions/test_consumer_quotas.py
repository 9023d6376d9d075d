"""The chat's websocket says why a message was refused: over a quota, or a withdrawn model.

Before: the websocket took every message a user sent, as fast as it was sent.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from channels.db import database_sync_to_async
from django.conf import settings as django_settings

from sessions.models import AgentSession, Event
from tests.sessions.test_stream_clients import communicator, connect, cookie_for, frames

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def chat_session(user: Any, model: str = "") -> AgentSession:
    conn = redis.Redis.from_url(django_settings.REDIS_URL)
    for key in conn.scan_iter(f"{django_settings.REDIS_PREFIX}:quota:*"):
        conn.delete(key)
    return AgentSession.objects.create(owner=user, model=model)


@database_sync_to_async
def user_messages(session: AgentSession) -> int:
    return Event.objects.filter(session=session, kind="user_message").count()


async def reply_to(comm: Any, text: str) -> dict[str, Any]:
    """The answer to a message frame (its user_message event may come first)."""
    await comm.send_to(text_data=f'{{"type": "message", "text": "{text}"}}')
    while True:
        frame = (await frames(comm, 1))[0]
        if frame.get("type") in {"message", "error"}:
            return frame


async def test_a_message_over_the_minutes_limit_gets_a_clear_error_frame(
    user: Any, settings: Any
) -> None:
    settings.AGENTSITE_QUOTA_MESSAGES_PER_MINUTE = 1
    session = await chat_session(user)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)

    assert (await reply_to(comm, "first"))["type"] == "message"
    refused = await reply_to(comm, "second")

    assert refused["type"] == "error" and refused["code"] == "quota_exceeded"
    assert "limit of 1 messages a minute" in refused["message"]
    assert "try again in" in refused["message"]
    assert await user_messages(session) == 1
    await comm.disconnect()


async def test_a_message_to_a_session_on_a_model_not_offered_gets_an_error_frame(
    user: Any,
) -> None:
    session = await chat_session(user, model="claude-opus-4-1")
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)

    refused = await reply_to(comm, "hello")

    assert refused["type"] == "error" and refused["code"] == "model_not_allowed"
    assert "claude-opus-4-1" in refused["message"]
    assert await user_messages(session) == 0
    await comm.disconnect()
