"""Many followers of one session on a real daphne: frames written straight to the
sockets (agentsite.web.wire, streams.admit_parked) arrive exactly once, in
order, intact, beside the replies and replays that still go through ASGI."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from sessions.tokens import session_token_seq
from tests.sessions.test_stream_clients import (
    api_token_for,
    append,
    daphne_running,
    make_session,
    token_at,
)

pytestmark = pytest.mark.django_db(transaction=True)
FOLLOWERS = 25
WAIT_S = 30
# Lengths on each side of the frame header's size classes (< 126, 16-bit, 64-bit),
# in characters that take 1, 2 and 3 bytes in UTF-8.
TEXTS = ["a", "é" * 70, "x" * 200, "☃" * 30_000, "y" * 70_000, "<last>"]


@pytest.fixture(scope="module")
def web(processes: Any) -> Iterator[str]:
    with daphne_running(processes, "daphne-fanout-wire") as url:
        yield url


async def open_follower(web: str, session_id: str, raw_token: str, after: str) -> ClientConnection:
    url = web.replace("http://", "ws://") + f"/ws/sessions/{session_id}/?after={after}"
    protocols = [Subprotocol("agentsite"), Subprotocol(f"agentsite.bearer.{raw_token}")]
    return await connect(url, subprotocols=protocols, max_size=None, open_timeout=WAIT_S)


async def events_until(
    ws: ClientConnection, last_seq: int, reply: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Event frames up to ``last_seq``, and any reply frames, in the order received;
    also up to ``reply`` when one is awaited (the consumer answers a ping on its own
    time, so its pong may come after the events appended meanwhile)."""
    received: list[dict[str, Any]] = []
    async with asyncio.timeout(WAIT_S):
        while not any(f.get("seq") == last_seq for f in received) or (
            reply is not None and reply not in received
        ):
            received.append(json.loads(await ws.recv()))
    return received


async def test_every_follower_gets_each_event_once_in_order_and_intact(web: str, user: Any) -> None:
    session = await make_session(user, events=2)
    raw_token = await api_token_for(user)
    async with contextlib.AsyncExitStack() as stack:
        followers = [
            await stack.enter_async_context(
                await open_follower(web, session.id, raw_token, token_at(session, 2))
            )
            for _ in range(FOLLOWERS)
        ]
        # Every follower is live once it has the first event after its position.
        await append(session_id=session.id, kind="assistant_delta", payload={"text": "ready"})
        await asyncio.gather(*(events_until(ws, 3) for ws in followers))
        # One asks for a ping mid-stream: its pong goes out through ASGI, between frames
        # written directly, and the re-read of the log it prompts repeats nothing.
        pinging = followers[0]
        for i, text in enumerate(TEXTS):
            await append(session_id=session.id, kind="assistant_delta", payload={"text": text})
            if i == 2:
                await pinging.send(json.dumps({"type": "ping"}))
        last = 3 + len(TEXTS)
        # A follower that joins late, from event 4: replayed, then live, on the same wire.
        late = await stack.enter_async_context(
            await open_follower(web, session.id, raw_token, token_at(session, 4))
        )
        received = await asyncio.gather(
            events_until(pinging, last, reply={"type": "pong"}),
            *(events_until(ws, last) for ws in [*followers[1:], late]),
        )

    for frames in received[:-1]:
        events = [f for f in frames if "seq" in f]
        assert [f["seq"] for f in events] == list(range(4, last + 1))
        assert [f["payload"]["text"] for f in events] == TEXTS
        for frame in events:
            seq = session_token_seq(frame["token"], session_id=session.id, owner_id=user.pk)
            assert seq == frame["seq"]
    assert {"type": "pong"} in received[0]
    late_events = [f for f in received[-1] if "seq" in f]
    assert [f["seq"] for f in late_events] == list(range(5, last + 1))
    assert [f["payload"]["text"] for f in late_events] == TEXTS[1:]
