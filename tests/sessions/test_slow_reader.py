"""A follower that stops reading costs the web process a bounded amount of memory.

Writing to a socket never waits for its reader, so whatever a stalled client
does not take piles up in daphne's buffer. Past ``AGENTSITE_WS_SEND_BUFFER_MAX``
the follower is cut off; it resumes from its last token and loses nothing.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from tests.sessions.test_fanout_wire import events_until, open_follower
from tests.sessions.test_stream_clients import (
    api_token_for,
    append,
    daphne_serve,
    make_session,
    token_at,
)

pytestmark = pytest.mark.django_db(transaction=True)
BOUND = 1 << 16
EVENTS = 400
TEXT = "z" * 32_000  # 400 of them: 12.8 MB, more than the kernel buffers on both sides hold


@pytest.fixture(scope="module")
def web(processes: Any) -> str:
    env = {"AGENTSITE_WS_SEND_BUFFER_MAX": str(BOUND)}
    return daphne_serve(processes, "daphne-slow-reader", env=env)


async def test_a_follower_that_stops_reading_is_cut_off_and_resumes_without_loss(
    web: str, user: Any
) -> None:
    session = await make_session(user, events=1)
    raw_token = await api_token_for(user)
    host, port = web.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that takes little
    sock.connect((host, int(port)))
    url = f"ws://{host}:{port}/ws/sessions/{session.id}/?after={token_at(session, 1)}"
    protocols = [Subprotocol("agentsite"), Subprotocol(f"agentsite.bearer.{raw_token}")]
    stalled = await connect(url, sock=sock, subprotocols=protocols, max_size=None, max_queue=1)
    await append(session_id=session.id, kind="assistant_delta", payload={"text": "live"})
    await events_until(stalled, 2)

    # The client reads nothing while the session produces far more than the bound.
    for _ in range(EVENTS):
        await append(session_id=session.id, kind="assistant_delta", payload={"text": TEXT})
    last = 2 + EVENTS

    received: list[dict[str, Any]] = []
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(60):
            while True:
                received.append(json.loads(await stalled.recv()))
    seqs = [frame["seq"] for frame in received]
    assert seqs and seqs[-1] < last  # cut off: not everything was kept for it
    assert seqs == list(range(3, seqs[-1] + 1))

    # It resumes after the last event it got: the rest arrives, nothing twice.
    resumed = await open_follower(web, session.id, raw_token, received[-1]["token"])
    try:
        rest = [frame["seq"] for frame in await events_until(resumed, last) if "seq" in frame]
    finally:
        await resumed.close()
    assert seqs + rest == list(range(3, last + 1))
