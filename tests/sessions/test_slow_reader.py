"""A follower that stops reading costs the web process a bounded amount of memory.

Writing to a socket never waits for its reader, so whatever a stalled client
does not take piles up in daphne's buffer. Past ``AGENTSITE_STREAM_SEND_BUFFER_MAX``
a stream waits for its client; one that has not read for ``AGENTSITE_STREAM_STALL_S``
is cut off (a websocket or an event stream alike). It resumes from its last
token and loses nothing, through a replay far larger than the bound.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from tests.sessions.test_fanout_wire import events_until, open_follower
from tests.sessions.test_stream_clients import (
    api_token_for,
    append,
    daphne_running,
    make_session,
    sse_events,
    token_at,
)

pytestmark = pytest.mark.django_db(transaction=True)
BOUND = 1 << 16
STALL_S = 1
EVENTS = 400
TEXT = "z" * 32_000  # 400 of them: 12.8 MB, more than the kernel buffers on both sides hold


def stalled_socket(web: str) -> socket.socket:
    """A connection to ``web`` whose reader takes little: it barely reads at all."""
    host, port = web.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    return sock


@pytest.fixture(scope="module")
def web(processes: Any) -> Iterator[str]:
    env = {"AGENTSITE_STREAM_SEND_BUFFER_MAX": str(BOUND), "AGENTSITE_STREAM_STALL_S": str(STALL_S)}
    with daphne_running(processes, "daphne-slow-reader", env=env) as url:
        yield url


async def test_a_follower_that_stops_reading_is_cut_off_and_resumes_without_loss(
    web: str, user: Any
) -> None:
    session = await make_session(user, events=1)
    raw_token = await api_token_for(user)
    url = (
        web.replace("http://", "ws://") + f"/ws/sessions/{session.id}/?after={token_at(session, 1)}"
    )
    protocols = [Subprotocol("agentsite"), Subprotocol(f"agentsite.bearer.{raw_token}")]
    stalled = await connect(
        url, sock=stalled_socket(web), subprotocols=protocols, max_size=None, max_queue=1
    )
    await append(session_id=session.id, kind="assistant_delta", payload={"text": "live"})
    await events_until(stalled, 2)

    # The client reads nothing while the session produces far more than the bound.
    for _ in range(EVENTS):
        await append(session_id=session.id, kind="assistant_delta", payload={"text": TEXT})
    last = 2 + EVENTS
    await asyncio.sleep(3 * STALL_S)  # and for longer than the server waits for a reader

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


def sse_read_until_cut_off(
    response: http.client.HTTPResponse, within_s: float = 30
) -> tuple[list[dict[str, Any]], bool]:
    """The events an event stream delivers until the server drops the connection, and
    whether it did within ``within_s``.

    Dropped, the connection is reset: what the client's kernel still held for it
    is gone too, so the client may have seen fewer events than were sent (it
    resumes after the last one it saw).
    """
    lines: list[str] = []
    deadline = time.monotonic() + within_s
    dropped = False
    try:
        while time.monotonic() < deadline:
            line = response.readline()
            if not line:
                dropped = True
                break
            lines.append(line.decode().rstrip("\n"))
    except (http.client.IncompleteRead, ConnectionResetError):
        dropped = True
    return [e for e in sse_events(lines) if e["data"] is not None], dropped


def sse_resume(web: str, session_id: str, raw_token: str, last_id: str, last: int) -> list[int]:
    """Reconnect as an EventSource does (``Last-Event-ID``) and read up to seq ``last``."""
    headers = {"Authorization": f"Bearer {raw_token}", "Last-Event-ID": last_id}
    seqs: list[int] = []
    url = f"{web}/api/sessions/{session_id}/stream"
    with httpx.stream("GET", url, headers=headers, timeout=60) as response:
        for event in sse_events(response.iter_lines()):
            if event["data"] is not None:
                seqs.append(event["data"]["seq"])
                if seqs[-1] == last:
                    break
    return seqs


async def test_an_event_stream_that_stops_being_read_is_dropped_and_resumes_without_loss(
    web: str, user: Any
) -> None:
    session = await make_session(user, events=1)
    raw_token = await api_token_for(user)
    host, port = web.removeprefix("http://").split(":")
    stalled = http.client.HTTPConnection(host, int(port))
    stalled.sock = stalled_socket(web)
    stalled.sock.settimeout(20)
    first = token_at(session, 1)
    stalled.request(
        "GET",
        f"/api/sessions/{session.id}/stream?after={first}",
        headers={"Authorization": f"Bearer {raw_token}"},
    )
    response = await asyncio.to_thread(stalled.getresponse)
    assert response.status == 200

    # The client reads nothing while the session produces far more than the bound.
    for _ in range(EVENTS):
        await append(session_id=session.id, kind="assistant_delta", payload={"text": TEXT})
    last = 1 + EVENTS
    await asyncio.sleep(3 * STALL_S)  # and for longer than the server waits for a reader

    received, dropped = await asyncio.to_thread(sse_read_until_cut_off, response)
    assert dropped
    seqs = [event["data"]["seq"] for event in received]
    assert seqs == list(range(2, 2 + len(seqs)))
    assert not seqs or seqs[-1] < last  # dropped: not everything was kept for it

    resume_from = received[-1]["id"] if received else first
    rest = await asyncio.to_thread(sse_resume, web, session.id, raw_token, resume_from, last)
    assert seqs + rest == list(range(2, last + 1))
