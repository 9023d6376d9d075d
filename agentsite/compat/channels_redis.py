"""channels_redis's pub/sub layer: its wire format, and how its receiver idles.

Verified against channels_redis 4.3.0. Checked by ``tests/compat/test_channels_redis.py``.

- ``RedisPubSubChannelLayer.group_send`` is one PUBLISH of ``layer.serialize(message)``
  to the channel ``RedisPubSubLoopLayer._get_group_channel_name(group)``, that is
  ``{prefix}__group__{group}``; ``jobs/live.py`` publishes the same bytes itself.
- ``RedisSingleShardConnection._do_receiving`` reads its connection only while the
  connection holds a subscription, and otherwise sleeps 100 ms between looks; one
  standing subscription (``subscribe_standing_channel``) keeps it reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PUBSUB_BACKEND = "channels_redis.pubsub.RedisPubSubChannelLayer"


def group_channel(prefix: str, group: str) -> str:
    """The Redis channel the pub/sub layer with ``prefix`` publishes ``group``'s messages to."""
    return f"{prefix}__group__{group}"


def serialized(layer: Any, message: Mapping[str, object]) -> bytes:
    """``message`` as the pub/sub layer publishes it (msgpack, optionally encrypted)."""
    data: bytes = layer.serialize(message)
    return data


async def subscribe_standing_channel(layer: Any) -> str:
    """A new channel that nobody sends to: while it stays subscribed, the layer's
    receiver reads its connection instead of polling every 100 ms."""
    channel: str = await layer.new_channel("standing.")
    return channel
