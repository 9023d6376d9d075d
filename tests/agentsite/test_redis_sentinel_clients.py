"""With REDIS_SENTINELS, every kind of Redis client of a process reaches the primary the
sentinels name, with the sentinels' password, the data password and REDIS_DB."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import BASE_DIR
from tests.servers import OwnSentinels

pytestmark = pytest.mark.slow

EVERY_CLIENT = """
import asyncio, os, socket, sys
import django
django.setup()
import django_rq
from channels.layers import get_channel_layer
from agentsite.core.redis_connections import async_redis_client, redis_client
from agentsite.core.telemetry import metrics_redis
from jobs.live import direct_publish_prefix, group_send

key, primary_port = sys.argv[1], int(sys.argv[2])

def primary_sockets():
    \"\"\"The TCP options of every socket this process holds to the primary.\"\"\"
    found = []
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue  # not a socket
        with sock:
            try:
                port = sock.getpeername()[1] if sock.type == socket.SOCK_STREAM else None
            except (OSError, IndexError, TypeError):
                continue
            if port == primary_port:
                found.append((
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
                ))
    return found
# Held, so that each keeps its connection open to be looked at.
clients = [
    redis_client(),
    metrics_redis(),
    django_rq.get_connection("tools"),
    django_rq.get_queue("default").connection,
]
clients[0].set(key, "factory")
assert all(client.ping() for client in clients)
assert direct_publish_prefix() is not None  # live updates publish on the sentinel's primary

async def through_the_layer():
    async_client = async_redis_client()
    assert await async_client.ping()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("probe", channel)
    group_send("probe", {"type": "probe.sent", "text": "hello"})
    message = await asyncio.wait_for(layer.receive(channel), 10)
    return message, primary_sockets()

message, sockets = asyncio.run(through_the_layer())
print(message["text"])
# Every connection to the primary gives a silent peer up in about 10 s.
print(len(sockets) >= 7, set(sockets) == {(1, 5, 10000)}, sockets)
"""


@pytest.fixture(scope="module")
def guarded_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnSentinels]:
    root = tmp_path_factory.mktemp("sentinels")
    servers = OwnSentinels(root, password="data-secret", sentinel_password="sentinel-secret")
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


def test_every_client_reaches_the_primary_through_guarded_sentinels(
    guarded_cluster: OwnSentinels,
) -> None:
    key = f"sentinel-probe-{uuid.uuid4().hex}"
    env = {
        **os.environ,
        **guarded_cluster.env(key),
        "REDIS_DB": "3",
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
    }
    result = subprocess.run(
        [sys.executable, "-c", EVERY_CLIENT, key, str(guarded_cluster.primary_port)],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "hello"
    assert lines[1].startswith("True True"), lines[1]
    assert guarded_cluster.data_client(guarded_cluster.primary_port, db=3).get(key) == "factory"


def test_a_wrong_sentinel_password_is_refused(guarded_cluster: OwnSentinels) -> None:
    env = {
        **os.environ,
        **guarded_cluster.env("wrong"),
        "REDIS_SENTINEL_PASSWORD": "not-it",
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
    }
    script = "import django; django.setup(); import django_rq; django_rq.get_connection().ping()"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=BASE_DIR, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "MasterNotFoundError" in result.stderr
