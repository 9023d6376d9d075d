"""channels_redis's pub/sub layer: its wire format, and how its receiver idles.

Verified against channels_redis 4.3.0. Checked by ``tests/compat/test_channels_redis.py``.

- ``RedisPubSubChannelLayer.group_send`` is one PUBLISH of ``layer.serialize(message)``
  to the channel ``RedisPubSubLoopLayer._get_group_channel_name(group)``, that is
  ``{prefix}__group__{group}``; ``jobs/live.py`` publishes the same bytes itself.
- ``RedisSingleShardConnection._do_receiving`` reads its connection only while the
  connection holds a subscription, and otherwise sleeps 100 ms between looks; one
  standing subscription (``subscribe_standing_channel``) keeps it reading. It reads with
  a 100 ms timeout, so even then an idle web process woke ten times a second, each a
  timeout raised and caught in redis-py (about 6 ms of CPU a second on a quiet box):
  ``receiver_waits`` replaces it with the same loop reading until a message comes.
  Nothing else reads that connection (subscribing only writes to it), a cancel of the
  receive task (``flush``) ends the wait, and a dropped connection ends it with an error,
  as it ended the 100 ms read (the TCP keepalive of ``DEAD_PEER_OPTIONS`` notices a
  silent peer; the read timeout never did).
- Each ``RedisSingleShardConnection`` reads its subscriptions through one redis-py
  ``PubSub`` (``_pubsub``, on the per-loop layer of ``RedisPubSubChannelLayer._get_layer``).
  When that connection drops, redis-py connects it again and re-subscribes, calling the
  connection's connect callbacks (held weakly); what was published meanwhile is gone.
  ``watch_reconnects`` registers one more callback, so a caller learns of the gap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from channels_redis import pubsub as _pubsub

PUBSUB_BACKEND = "channels_redis.pubsub.RedisPubSubChannelLayer"


def group_channel(prefix: str, group: str) -> str:
    """The Redis channel the pub/sub layer with ``prefix`` publishes ``group``'s messages to."""
    return f"{prefix}__group__{group}"


def serialized(layer: Any, message: Mapping[str, object]) -> bytes:
    """``message`` as the pub/sub layer publishes it (msgpack, optionally encrypted)."""
    data: bytes = layer.serialize(message)
    return data


async def _do_receiving(self: Any) -> None:
    """``RedisSingleShardConnection._do_receiving`` of 4.3.0, reading with no timeout."""
    while True:
        try:
            if self._pubsub and self._pubsub.subscribed:
                message = await self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=None
                )
                self._receive_message(message)
            else:
                await asyncio.sleep(0.1)
        except (  # noqa: UP041  (the library's own lines, kept as they are)
            asyncio.CancelledError,
            asyncio.TimeoutError,
            GeneratorExit,
        ):
            raise
        except BaseException:
            _pubsub.logger.exception("Unexpected exception in receive task")
            await asyncio.sleep(1)


def receiver_waits() -> None:
    """Make every pub/sub layer's receiver wait for its next message instead of looking
    every 100 ms (idempotent; receive tasks started later take it)."""
    _pubsub.RedisSingleShardConnection._do_receiving = _do_receiving


def receiver_waits_installed() -> bool:
    return _pubsub.RedisSingleShardConnection._do_receiving is _do_receiving


async def subscribe_standing_channel(layer: Any) -> str:
    """A new channel that nobody sends to: while it stays subscribed, the layer's
    receiver reads its connection instead of polling every 100 ms, and (``receiver_waits``)
    waits there for the next message."""
    receiver_waits()
    channel: str = await layer.new_channel("standing.")
    return channel


class ReconnectWatch:
    """Calls ``callback`` each time a pub/sub connection it watches has connected again
    (and re-subscribed). The connections hold it weakly: keep it as long as it should
    watch."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback

    async def connected(self, connection: Any) -> None:
        self.callback()  # inside the reconnect: schedule work, never await the layer here


def watch_reconnects(layer: Any, callback: Callable[[], None]) -> ReconnectWatch | None:
    """Watch the pub/sub connections ``layer`` holds in the running event loop.

    Call it after a subscription of the layer in this loop (so the connections exist and
    their first connect is past): every later connect is a reconnect. None for a layer
    that is not channels_redis's pub/sub layer.
    """
    get_layer = getattr(layer, "_get_layer", None)
    if get_layer is None:
        return None
    watch = ReconnectWatch(callback)
    for shard in get_layer()._shards:
        pubsub = shard._pubsub
        if pubsub is not None and pubsub.connection is not None:
            pubsub.connection.register_connect_callback(watch.connected)
    return watch
