"""agentsite.compat.channels_redis against a real pub/sub layer on the test Redis."""

from __future__ import annotations

import ast
import asyncio
import uuid
from pathlib import Path

import redis
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer
from django.conf import settings

from agentsite.compat import channels_redis
from tests.compat.internals import method, module_tree
from tests.servers import OwnRedis


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


async def test_a_reconnect_of_the_subscription_is_reported_and_it_receives_again(
    tmp_path: Path,
) -> None:
    """``watch_reconnects``: redis-py re-subscribes after the drop and then tells us."""
    server = OwnRedis(tmp_path)
    server.start()
    layer = RedisPubSubChannelLayer(hosts=[server.url], prefix="compat")
    reconnected = asyncio.Event()
    try:
        channel = await channels_redis.subscribe_standing_channel(layer)
        watch = channels_redis.watch_reconnects(layer, reconnected.set)
        assert watch is not None
        server.kill()
        await asyncio.sleep(0.5)
        assert not reconnected.is_set()
        server.start()  # empty: only the re-subscription brings the channel back
        await asyncio.wait_for(reconnected.wait(), 30)
        await layer.send(channel, {"type": "after.reconnect"})
        assert await asyncio.wait_for(layer.receive(channel), 10) == {"type": "after.reconnect"}
    finally:
        await layer.flush()
        server.kill()


def test_a_layer_other_than_the_pub_sub_one_is_not_watched() -> None:
    assert channels_redis.watch_reconnects(object(), lambda: None) is None


def test_the_waiting_receiver_is_the_layers_own_loop_but_for_its_read_timeout() -> None:
    """``receiver_waits`` copies ``_do_receiving``: a release that changes it shows here."""
    theirs = method(
        module_tree("channels_redis.pubsub"), "RedisSingleShardConnection", "_do_receiving"
    )
    (ours,) = [
        node
        for node in module_tree("agentsite.compat.channels_redis").body
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "_do_receiving"
    ]
    expected = ast.unparse(ast.Module(theirs.body, [])).replace("timeout=0.1", "timeout=None")
    expected = expected.replace("logger.exception", "_pubsub.logger.exception")
    assert ast.unparse(ast.Module(ours.body[1:], [])) == expected  # after our docstring


async def test_a_receiver_with_a_standing_subscription_waits_instead_of_looking() -> None:
    """An idle web process: no read of the connection returns until a message comes."""
    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix="compat")
    try:
        channel = await channels_redis.subscribe_standing_channel(layer)
        assert channels_redis.receiver_waits_installed()
        pubsub = layer._get_layer()._shards[0]._pubsub
        reads = 0
        real = pubsub.get_message

        async def counted(*args: object, **kwargs: object) -> object:
            nonlocal reads
            reads += 1
            return await real(*args, **kwargs)

        pubsub.get_message = counted
        await asyncio.sleep(0.2)  # the read in progress when the count began returns, if
        reads = 0  # it was one with a timeout
        await asyncio.sleep(1.0)
        assert reads == 0  # ten a second with the layer's own 100 ms reads
        await layer.send(channel, {"type": "woken"})
        assert await asyncio.wait_for(layer.receive(channel), 5) == {"type": "woken"}
    finally:
        await layer.flush()
