"""One channel-layer subscription per group per process, shared by its local followers.

A process may hold thousands of followers of one group (the websockets and
event streams of one session). Giving each its own channel costs, per
follower, a Redis subscription when it connects and, per message, a copy
decoded from msgpack and passed through a task of its own. Here a process
follows a group once: one channel in the group, read by one task, whose
messages go to every local follower's ``deliver`` as the same object (which
followers must not change).

Before a follower relies on the live feed it awaits ``ready()``: the feed's
first marker, sent through the group, has come back, which proves the Redis
subscription live; everything published after it reaches the follower.
Followers that join while the marker is on its way wait for that one, so
1,000 followers connecting at once cost one marker.

The first feed of an event loop also subscribes a channel that is never
released (``_keep_listening``): channels_redis's pub/sub receiver sleeps 100 ms
between looks while its connection holds no subscription, so without it the
first marker of an otherwise idle process (a new stream on a quiet server)
came back after up to 100 ms instead of one Redis round trip.

When the subscription's Redis connection drops (Redis restarted, a Sentinel
failover), redis-py connects again and re-subscribes, but what was published in
between is gone. Each feed of the loop then sends a marker of its own and, once
it has come back through the new subscription, gives its followers a
``stream.check``: they re-read what they follow (a stream its log, from its
cursor), so the gap costs one re-read instead of waiting for the next idle tick.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
import weakref
from collections.abc import Callable
from typing import Any, Final

from channels.layers import get_channel_layer

from agentsite.compat import channels_redis

log = logging.getLogger(__name__)

SYNC_TYPE = "fanout.sync"
# What followers get after a reconnect: re-read what you follow.
CHECK_TYPE: Final = "stream.check"
# Waiting longer than this for the marker, a follower goes on without the proof
# (its stream re-reads the log when idle, so a lost message costs latency only).
PROOF_TIMEOUT_S = 2.0

Deliver = Callable[[dict[str, Any]], None]


class Feed:
    """A process's subscription to one group and the followers it delivers to."""

    def __init__(self, group: str, feeds: dict[str, Feed]) -> None:
        self.group = group
        self.feeds = feeds
        self.followers: dict[int, Deliver] = {}
        self.nonce = uuid.uuid4().hex
        self.resync_nonce = uuid.uuid4().hex
        self.proof: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.started = asyncio.create_task(self.start())
        self.reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        layer = get_channel_layer()
        assert layer is not None, "CHANNEL_LAYERS is not configured"
        self.layer = layer
        await _keep_listening(layer)
        self.channel = await layer.new_channel()
        await layer.group_add(self.group, self.channel)
        self.reader = asyncio.create_task(self.read())
        await self.marker_send()

    async def marker_send(self) -> None:
        await self.layer.group_send(self.group, {"type": SYNC_TYPE, "nonce": self.nonce})

    async def resync(self) -> None:
        """After a reconnect: a check for every follower once the subscription is proved."""
        try:
            await self.layer.group_send(self.group, {"type": SYNC_TYPE, "nonce": self.resync_nonce})
        except Exception:
            log.warning("no marker for %s after a reconnect; checking at once", self.group)
            self.deliver({"type": CHECK_TYPE})

    async def read(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            if message.get("type") == SYNC_TYPE:
                if message.get("nonce") == self.nonce and not self.proof.done():
                    self.proof.set_result(None)
                elif message.get("nonce") == self.resync_nonce:
                    self.deliver({"type": CHECK_TYPE})
                continue
            self.deliver(message)

    def deliver(self, message: dict[str, Any]) -> None:
        for deliver in list(self.followers.values()):
            try:
                deliver(message)
            except Exception:
                log.exception("a follower of %s failed to take a message", self.group)

    async def stop(self) -> None:
        if not self.started.done():
            await asyncio.wait([self.started])
        if self.reader is not None:
            self.reader.cancel()  # the channel layer drops the channel's subscription
        if self.started.exception() is None:
            await self.layer.group_discard(self.group, self.channel)


class Subscription:
    """A follower's place in a feed: ``await ready()`` before relying on it, ``leave()`` after."""

    def __init__(self, feed: Feed, key: int) -> None:
        self.feed = feed
        self.key = key
        self.left = False

    async def ready(self) -> None:
        feed = self.feed
        try:
            async with asyncio.timeout(PROOF_TIMEOUT_S):
                await asyncio.shield(feed.started)
                await asyncio.shield(feed.proof)
        except TimeoutError:
            log.warning("marker for %s did not come back; going on without it", feed.group)
            if feed.started.done() and feed.started.exception() is None:
                try:
                    await feed.marker_send()  # for the followers that come next
                except Exception as exc:
                    # Redis went away meanwhile (a failover, a restart): the follower goes
                    # on all the same, as promised; the reconnect's resync, or its idle
                    # re-read of the log, brings it what the gap cost.
                    log.warning("no marker for %s either: %r", feed.group, exc)

    async def leave(self) -> None:
        if self.left:
            return
        self.left = True
        feed = self.feed
        feed.followers.pop(self.key, None)
        if not feed.followers and feed.feeds.get(feed.group) is feed:
            del feed.feeds[feed.group]  # a follower arriving now starts a new feed
            await feed.stop()


# One set of feeds per event loop (tests run several loops in one process).
_feeds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Feed]] = (
    weakref.WeakKeyDictionary()
)
# The channel each event loop keeps subscribed, so that its receiver never idles.
_listening: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future[str]] = (
    weakref.WeakKeyDictionary()
)
# Each event loop's watch on its subscriptions' reconnects (held here: redis-py holds
# it weakly), and the resyncs it has started.
_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, object] = weakref.WeakKeyDictionary()
_resyncs: set[asyncio.Task[None]] = set()


def _resync_all() -> None:
    """The loop's subscriptions reconnected: every started feed proves itself and checks."""
    loop = asyncio.get_running_loop()
    for feed in list(_feeds.get(loop, {}).values()):
        if feed.started.done() and feed.started.exception() is None:
            task = loop.create_task(feed.resync())
            _resyncs.add(task)
            task.add_done_callback(_resyncs.discard)


async def _keep_listening(layer: Any) -> None:
    """Subscribe, once per event loop, a channel nobody sends to and nobody releases.

    channels_redis's pub/sub layer reads its connection only while it holds a
    subscription and otherwise polls every 100 ms; one standing subscription keeps
    it reading, so a new group's first message arrives in a round trip. (One
    channel covers one Redis host, the only layout agentsite configures.)
    """
    loop = asyncio.get_running_loop()
    standing = _listening.get(loop)
    if standing is None:
        standing = _listening[loop] = loop.create_future()
        try:
            standing.set_result(await channels_redis.subscribe_standing_channel(layer))
            _watches[loop] = channels_redis.watch_reconnects(layer, _resync_all)
        except BaseException as exc:
            del _listening[loop]  # the next feed tries again
            if isinstance(exc, asyncio.CancelledError):
                standing.cancel()
            else:
                standing.set_exception(exc)
                standing.exception()  # retrieved: the feed that started it raises it
            raise
        return
    await asyncio.shield(standing)


_keys = itertools.count()


def join(group: str, deliver: Deliver) -> Subscription:
    """Follow ``group``: ``deliver`` gets each message from now on, in order."""
    feeds = _feeds.setdefault(asyncio.get_running_loop(), {})
    feed = feeds.get(group)
    if feed is None:
        feed = feeds[group] = Feed(group, feeds)
    key = next(_keys)
    feed.followers[key] = deliver
    return Subscription(feed, key)


def followers(group: str) -> int:
    """How many local followers ``group`` has in this event loop."""
    feed = _feeds.get(asyncio.get_running_loop(), {}).get(group)
    return len(feed.followers) if feed is not None else 0
