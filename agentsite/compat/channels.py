"""Channels' consumer loop, run without its task per socket.

Verified against channels 4.3.2. Checked by ``tests/compat/test_channels.py``.

``AsyncConsumer.__call__`` sets ``self.scope``, ``self.channel_layer`` and
``self.base_send`` (which ``send`` writes to), then hands every message to
``dispatch`` until a handler raises ``StopConsumer``; for a consumer without a
channel layer it does so through ``await_many_dispatch``, a task and an
``asyncio.wait`` per message to watch a single source.
"""

from __future__ import annotations

from typing import Any

from channels.consumer import AsyncConsumer
from channels.exceptions import StopConsumer


async def serve_without_layer(consumer: AsyncConsumer, scope: Any, receive: Any, send: Any) -> None:
    """``AsyncConsumer.__call__`` for a consumer without a channel layer: the client's
    messages dispatched in turn, as Channels does, without a task per message."""
    consumer.scope = scope
    consumer.channel_layer = None
    consumer.base_send = send
    try:
        while True:
            await consumer.dispatch(await receive())
    except StopConsumer:
        pass
