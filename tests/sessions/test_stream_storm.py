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


async def test_a_process_keeps_listening_after_its_last_follower_left(user: Any) -> None:
    # channels_redis's pub/sub receiver sleeps 100 ms between looks while it holds no
    # subscription: a new stream on a quiet process waited up to that long for its
    # marker (docs/benchmarks.md, bench/responses.py's time to first text).
    from django.conf import settings
    from redis import Redis

    from agentsite.core import fanout

    session = await make_session(user, events=1)
    cookie = await cookie_for(user)
    comm = communicator(session.id, headers=[cookie], after=token_at(session, 1))
    await connect(comm)
    await append(session_id=session.id, kind="assistant_delta", payload={"text": "x"})
    assert [f["seq"] for f in await frames_until(comm, 2)] == [2]
    await comm.disconnect()

    standing = fanout._listening[asyncio.get_running_loop()].result()
    redis = Redis.from_url(settings.REDIS_URL)
    try:
        assert dict(await asyncio.to_thread(redis.pubsub_numsub, standing)) == {
            standing.encode(): 1
        }
        layers: dict[str, Any] = settings.CHANNEL_LAYERS
        group = f"{layers['default']['CONFIG']['prefix']}__group__"
        left = await asyncio.to_thread(redis.pubsub_numsub, f"{group}{session.group_name}")
        assert dict(left) == {f"{group}{session.group_name}".encode(): 0}
    finally:
        redis.close()


async def test_followers_take_no_channel_layer_subscription_of_their_own(user: Any) -> None:
    # Each websocket used to get a channel of its own from Channels (a Redis SUBSCRIBE
    # as it connected, an UNSUBSCRIBE as it left, a reader task while open) that
    # nothing sent to: live messages reach followers through the shared feed.
    session = await make_session(user, events=1)
    cookie = await cookie_for(user)
    layer = get_channel_layer()
    warm = communicator(session.id, headers=[cookie], after=token_at(session, 1))
    await connect(warm)
    await append(session_id=session.id, kind="assistant_delta", payload={"text": "x"})
    # Live: the process follows the session (and the user's credentials) by now.
    assert [f["seq"] for f in await frames_until(warm, 2)] == [2]
    channels_before = set(layer._get_layer().channels)
    comms = [
        communicator(session.id, headers=[cookie], after=token_at(session, 2)) for _ in range(5)
    ]
    await asyncio.gather(*(connect(comm) for comm in comms))
    try:
        await append(session_id=session.id, kind="assistant_delta", payload={"text": "y"})
        received = await asyncio.gather(*(frames_until(comm, 3) for comm in [warm, *comms]))
        assert set(layer._get_layer().channels) == channels_before
    finally:
        await asyncio.gather(*(comm.disconnect() for comm in [warm, *comms]))
    assert [[f["seq"] for f in frames] for frames in received] == [[3]] * 6
