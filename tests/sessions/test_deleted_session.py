"""A deleted session is not found on every path: REST, server-sent events, websocket, page."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from sessions.models import AgentSession
from sessions.services import session_create, session_delete
from tests.conftest import api_client_for
from tests.sessions.test_stream_clients import close_code, communicator, connect, cookie_for

pytestmark = pytest.mark.django_db(transaction=True)


def deleted_session(owner: Any) -> AgentSession:
    session = session_create(owner=owner, title="gone")
    session_delete(session=session)
    return session


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/sessions/{id}"),
        ("delete", "/api/sessions/{id}"),
        ("post", "/api/sessions/{id}/messages"),
        ("get", "/api/sessions/{id}/events"),
        ("get", "/api/sessions/{id}/stream"),
    ],
)
def test_the_api_and_its_stream_answer_404(user: Any, method: str, path: str) -> None:
    session = deleted_session(user)
    client = api_client_for(user)
    body = {"data": {"text": "anyone?"}, "content_type": "application/json"}
    response = getattr(client, method)(
        path.format(id=session.id), **(body if method == "post" else {})
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_the_websocket_closes_with_4404(user: Any) -> None:
    session = await database_sync_to_async(deleted_session)(user)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    assert await close_code(comm) == 4404


def test_the_chat_page_is_404(user: Any) -> None:
    session = deleted_session(user)
    client = Client()
    client.force_login(user)
    assert client.get(f"/sessions/{session.id}/").status_code == 404
    assert client.get("/").status_code == 200
