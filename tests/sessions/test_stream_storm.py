"""Followers of one session that connect at once share one subscription proof.

Each follower used to send its own marker through the session's group and wait
for it: N followers connecting together cost N markers delivered to N followers
each, which is what stalled a web process when 1,000 followers reconnected at
once (bench/stream.py, reconnect storm). Now the first sends one and the rest
wait for that one; every follower still gets each later event exactly once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import get_channel_layer

from tests.sessions.test_stream_clients import (
    append,
    communicator,
    connect,
    cookie_for,
    frames_until,
    make_session,
    token_at,
)

pytestmark = pytest.mark.django_db(transaction=True)
FOLLOWERS = 40


async def sync_markers(layer: Any, channel: str, seen: list[dict[str, Any]]) -> None:
    """Collect the subscription markers sent through the group our channel is in."""
    while True:
        message = await layer.receive(channel)
        if message["type"].endswith(".sync"):
            seen.append(message)


async def test_followers_connecting_at_once_send_one_marker(user: Any) -> None:
    session = await make_session(user, events=3)
    cookie = await cookie_for(user)
    layer = get_channel_layer()
    listener = await layer.new_channel()
    await layer.group_add(session.group_name, listener)
    markers: list[dict[str, Any]] = []
    reader = asyncio.create_task(sync_markers(layer, listener, markers))
    comms = [
        communicator(session.id, headers=[cookie], after=token_at(session, 3))
        for _ in range(FOLLOWERS)
    ]
    await asyncio.gather(*(connect(comm) for comm in comms))
    try:
        for i in range(2):
            await append(session_id=session.id, kind="assistant_delta", payload={"text": f"{i}"})
        received = await asyncio.gather(*(frames_until(comm, 5) for comm in comms))
    finally:
        await asyncio.gather(*(comm.disconnect() for comm in comms))
        reader.cancel()
        await layer.group_discard(session.group_name, listener)
    assert len(markers) == 1
    assert [[f["seq"] for f in frames] for frames in received] == [[4, 5]] * FOLLOWERS


async def test_a_follower_after_the_last_one_left_proves_the_group_again(user: Any) -> None:
    session = await make_session(user, events=1)
    cookie = await cookie_for(user)
    for round_ in range(2):
        comm = communicator(session.id, headers=[cookie], after=token_at(session, 1 + round_))
        await connect(comm)
        await append(session_id=session.id, kind="assistant_delta", payload={"text": "x"})
        frames = await frames_until(comm, 2 + round_)
        await comm.disconnect()
        assert [f["seq"] for f in frames] == [2 + round_]
