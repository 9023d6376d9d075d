"""agentsite.compat.channels_redis against a real pub/sub layer on the test Redis."""

from __future__ import annotations

import ast
import uuid

import redis
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer
from django.conf import settings

from agentsite.compat import channels_redis
from tests.compat.internals import method, module_tree


def test_the_group_channel_is_the_layers_own_name_for_it() -> None:
    layer = RedisPubSubLoopLayer(hosts=[settings.REDIS_URL], prefix="compat")
    assert channels_redis.group_channel("compat", "jobs.7") == layer._get_group_channel_name(
        "jobs.7"
    )


async def test_a_message_published_by_hand_reaches_a_subscriber_of_the_layer() -> None:
    prefix = f"compat{uuid.uuid4().hex[:8]}"
    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix=prefix)
    try:
        channel = await layer.new_channel()
        await layer.group_add("updates", channel)
        message = {"type": "job.update", "job": {"id": "j1", "tags": ["a", 1, None]}}
        client = redis.Redis.from_url(settings.REDIS_URL)
        try:
            receivers = client.publish(
                channels_redis.group_channel(prefix, "updates"),
                channels_redis.serialized(layer, message),
            )
        finally:
            client.close()
        assert receivers == 1
        assert await layer.receive(channel) == message
    finally:
        await layer.flush()


def test_the_receiver_polls_while_it_holds_no_subscription() -> None:
    """Why ``subscribe_standing_channel`` exists: without a subscription, a sleep per look."""
    receiving = method(
        module_tree("channels_redis.pubsub"), "RedisSingleShardConnection", "_do_receiving"
    )
    branches = [node for node in ast.walk(receiving) if isinstance(node, ast.If)]
    assert any(
        "self._pubsub.subscribed" in ast.unparse(branch.test)
        and ast.unparse(branch.orelse[0]) == "await asyncio.sleep(0.1)"
        for branch in branches
        if branch.orelse
    )


async def test_a_standing_channel_is_a_new_channel_of_the_layer() -> None:
    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix="compat")
    try:
        channel = await channels_redis.subscribe_standing_channel(layer)
        assert channel.startswith("compat") and "standing." in channel
    finally:
        await layer.flush()
