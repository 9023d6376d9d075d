"""A follower whose feed's marker does not come back goes on, whatever Redis does then.

``Subscription.ready`` waits ``PROOF_TIMEOUT_S`` for the marker and then sends
another for the followers that come next. When Redis had gone in between (a
Sentinel failover right after a stream opened), that second marker raised out of
``ready`` and ended the stream with "Exception inside application": seen in
``test_redis_failover``, where the stream then never showed the job that ran after
the failover.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.test import override_settings

from agentsite.core import fanout
from tests.servers import OwnRedis


def layer_on(url: str) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [url], "prefix": f"proof-{uuid.uuid4().hex[:8]}"},
        }
    }


async def test_a_follower_goes_on_when_its_marker_is_lost_and_redis_is_gone_after(
    own_redis: OwnRedis, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fanout, "PROOF_TIMEOUT_S", 0.5)
    markers: list[str] = []
    send = fanout.Feed.marker_send

    async def first_marker_lost(feed: fanout.Feed) -> None:
        # The first marker is lost on its way (as one published before Redis has taken
        # the subscription is); Redis dies before the wait for it ends.
        markers.append(feed.group)
        if len(markers) == 1:
            own_redis.kill()
            return
        await send(feed)

    monkeypatch.setattr(fanout.Feed, "marker_send", first_marker_lost)
    with override_settings(CHANNEL_LAYERS=layer_on(own_redis.url)):
        layer = get_channel_layer()
        delivered: list[dict[str, Any]] = []
        subscription = fanout.join("proof.group", delivered.append)
        try:
            with caplog.at_level(logging.WARNING, logger="agentsite.core.fanout"):
                await asyncio.wait_for(subscription.ready(), 10)  # returns, does not raise
            assert markers == ["proof.group", "proof.group"]  # the second one was tried
            assert "did not come back" in caplog.text
            assert "no marker for proof.group either" in caplog.text
        finally:
            feed = subscription.feed
            feed.followers.clear()
            feed.feeds.pop(feed.group, None)
            if feed.reader is not None:
                feed.reader.cancel()
                await asyncio.gather(feed.reader, return_exceptions=True)
            await layer.flush()
