"""Leaving the chat (a cookie-authenticated socket) records how far the browser read."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from sessions.models import AgentSession
from tests.sessions.test_stream_clients import (
    api_token_for,
    communicator,
    connect,
    cookie_for,
    frames,
    make_session,
)

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def seen_seq(session: AgentSession) -> int:
    return AgentSession.objects.values_list("seen_seq", flat=True).get(pk=session.pk)


async def test_a_browser_visit_marks_the_log_seen(user: Any) -> None:
    session = await make_session(user, events=3)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    await frames(comm, 3)
    await comm.disconnect()
    assert await seen_seq(session) == 3


async def test_a_script_reading_with_an_api_token_does_not(user: Any) -> None:
    session = await make_session(user, events=3)
    raw = await api_token_for(user)
    comm = communicator(session.id, subprotocols=["agentsite", f"agentsite.bearer.{raw}"])
    await connect(comm)
    await frames(comm, 3)
    await comm.disconnect()
    assert await seen_seq(session) == 0
