"""Who may open a session's websocket, and the close codes for everyone else."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from agentsite.asgi import application
from tests.sessions.test_stream_clients import (
    api_token_for,
    close_code,
    communicator,
    connect,
    cookie_for,
    frames,
    make_session,
    token_at,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_without_credentials_it_closes_with_4401(user: Any) -> None:
    session = await make_session(user, events=1)
    comm = communicator(session.id)
    await connect(comm)
    assert await close_code(comm) == 4401


async def test_a_wrong_api_token_closes_with_4401(user: Any) -> None:
    session = await make_session(user, events=1)
    comm = communicator(session.id, subprotocols=["agentsite", "agentsite.bearer.ast_not-real"])
    await connect(comm)
    assert await close_code(comm) == 4401


async def test_another_users_session_closes_with_4404(user: Any, other_user: Any) -> None:
    session = await make_session(user, events=2)
    comm = communicator(session.id, headers=[await cookie_for(other_user)])
    await connect(comm)
    assert await close_code(comm) == 4404


async def test_a_missing_session_closes_with_4404(user: Any) -> None:
    comm = communicator("ses_nope", headers=[await cookie_for(user)])
    await connect(comm)
    assert await close_code(comm) == 4404


async def test_a_tampered_token_closes_with_4400(user: Any) -> None:
    session = await make_session(user, events=2)
    comm = communicator(session.id, headers=[await cookie_for(user)], after="garbage:token")
    await connect(comm)
    assert await close_code(comm) == 4400


async def test_a_token_of_another_session_closes_with_4404(user: Any) -> None:
    session = await make_session(user, events=2)
    other = await make_session(user, events=2)
    comm = communicator(session.id, headers=[await cookie_for(user)], after=token_at(other, 1))
    await connect(comm)
    assert await close_code(comm) == 4404


async def test_an_api_token_in_the_subprotocol_is_accepted(user: Any) -> None:
    session = await make_session(user, events=2)
    raw = await api_token_for(user)
    comm = communicator(session.id, subprotocols=["agentsite", f"agentsite.bearer.{raw}"])
    connected, subprotocol = await comm.connect(10)
    assert connected and subprotocol == "agentsite"
    assert [f["seq"] for f in await frames(comm, 2)] == [1, 2]
    await comm.disconnect()


async def test_an_api_token_in_the_query_string_is_not_accepted(user: Any) -> None:
    """A URL ends up in access logs: a token there would be handed to whoever reads them."""
    session = await make_session(user, events=1)
    comm = communicator(session.id, query=f"&token={await api_token_for(user)}")
    await connect(comm)
    assert await close_code(comm) == 4401


async def test_a_foreign_origin_is_refused_even_with_a_cookie(user: Any) -> None:
    session = await make_session(user, events=1)
    comm = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session.id}/",
        headers=[(b"origin", b"http://evil.example"), await cookie_for(user)],
    )
    connected, _ = await comm.connect(10)
    assert not connected


async def test_without_an_origin_a_login_cookie_is_not_enough(user: Any) -> None:
    session = await make_session(user, events=1)
    comm = WebsocketCommunicator(
        application, f"/ws/sessions/{session.id}/", headers=[await cookie_for(user)]
    )
    await connect(comm)
    assert await close_code(comm) == 4401


async def test_a_script_without_an_origin_connects_with_its_token(user: Any) -> None:
    session = await make_session(user, events=1)
    token = await api_token_for(user)
    comm = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session.id}/",
        subprotocols=["agentsite", f"agentsite.bearer.{token}"],
    )
    connected, subprotocol = await comm.connect(10)
    assert connected and subprotocol == "agentsite"
    assert [f["seq"] for f in await frames(comm, 1)] == [1]
    await comm.disconnect()
