"""The fan-out baseline: plain Channels, no agentsite.

A websocket consumer that joins one channels_redis group and forwards each
group message's text unchanged, served by daphne with agentsite's channel
layer settings. ``publish`` sends timestamped messages to that group the way a
worker would, with ``group_send``. What agentsite adds on top (auth, ownership,
replay, exactly-once tokens) is the difference bench/stream.py reports.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time

import django

django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

GROUP = "bench-raw-fanout"
# As long as the continuation token an agentsite frame carries.
TOKEN_LIKE = secrets.token_urlsafe(69)


class RawFollower(AsyncWebsocketConsumer):
    groups = [GROUP]

    async def connect(self) -> None:
        await self.accept()

    async def bench_message(self, message: dict[str, str]) -> None:
        await self.send(text_data=message["text"])


application = ProtocolTypeRouter({"websocket": URLRouter([path("ws/raw/", RawFollower.as_asgi())])})


async def publish(count: int, pause: float) -> None:
    layer = get_channel_layer()
    assert layer is not None
    for i in range(count):
        # The same shape and size as an agentsite frame for a short delta.
        payload = {"text": f"<{i}>", "t": time.time()}
        text = json.dumps(
            {"seq": i, "kind": "assistant_delta", "payload": payload, "token": TOKEN_LIKE}
        )
        await layer.group_send(GROUP, {"type": "bench.message", "text": text})
        await asyncio.sleep(pause)


if __name__ == "__main__":
    asyncio.run(publish(int(sys.argv[1]), float(sys.argv[2])))
