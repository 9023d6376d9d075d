"""The embedded Redis of `make run` listens on no TCP port, only on a socket private to its user.

RQ unpickles what it reads from Redis, so whoever can write to it runs code in
the workers: a passwordless loopback port let every local user do that.
"""

from __future__ import annotations

import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from channels_redis.pubsub import RedisPubSubChannelLayer
from rq import Queue, SimpleWorker

from agentsite.core.embedded_redis import (
    private_redis_command,
    private_redis_socket,
    unix_socket_url,
    wait_for_redis,
)
from agentsite.core.private_files import private_dir
from agentsite.core.workers import RidesOutRedis


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    data_dir = private_dir(tmp_path / "redis")
    socket_path = private_redis_socket(data_dir)
    process = subprocess.Popen(
        private_redis_command(socket_path, data_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        url = unix_socket_url(socket_path)
        wait_for_redis(url)
        yield url, socket_path
    finally:
        process.kill()
        process.wait()


def test_it_listens_on_a_private_socket_and_no_port(private_redis: tuple[str, Path]) -> None:
    url, socket_path = private_redis
    client = redis.Redis.from_url(url)

    assert client.config_get("port") == {"port": "0"}
    assert stat.S_IMODE(socket_path.stat().st_mode) == 0o700
    assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700


class InProcessWorker(RidesOutRedis, SimpleWorker):
    """agentsite's worker base on RQ's worker without a fork."""


def test_rq_runs_a_job_through_it(private_redis: tuple[str, Path]) -> None:
    url, _ = private_redis
    connection = redis.Redis.from_url(url)
    queue = Queue("tools", connection=connection)
    job = queue.enqueue("builtins.len", "four")

    # The workers' own base: plain RQ's stop may wait up to 60 s for its command listener.
    InProcessWorker([queue], connection=connection).work(burst=True)

    assert job.return_value() == 4


async def test_the_channel_layer_carries_messages_through_it(
    private_redis: tuple[str, Path],
) -> None:
    url, _ = private_redis
    layer = RedisPubSubChannelLayer(hosts=[url], prefix="embedded-test")
    channel = await layer.new_channel()
    await layer.group_add("g", channel)
    await layer.group_send("g", {"type": "session.event", "seq": 1})

    assert await layer.receive(channel) == {"type": "session.event", "seq": 1}
    await layer.flush()


def test_a_long_data_directory_puts_the_socket_in_a_private_temporary_one(tmp_path: Path) -> None:
    deep = private_dir(tmp_path / ("d" * 60) / ("e" * 60))

    socket_path = private_redis_socket(deep)

    assert len(bytes(socket_path)) <= 100
    assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
    socket_path.parent.rmdir()
