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
import asyncio, sys
import django
django.setup()
import django_rq
from channels.layers import get_channel_layer
from agentsite.core.redis_connections import async_redis_client, redis_client
from agentsite.core.telemetry import metrics_redis
from jobs.live import direct_publish_prefix, group_send

key = sys.argv[1]
redis_client().set(key, "factory")
metrics_redis().ping()
django_rq.get_connection("tools").ping()
assert django_rq.get_queue("default").connection.ping()
assert direct_publish_prefix() is not None  # live updates publish on the sentinel's primary

async def through_the_layer():
    assert await async_redis_client().ping()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("probe", channel)
    group_send(["probe"], {"type": "probe.sent", "text": "hello"})
    return await asyncio.wait_for(layer.receive(channel), 10)

print(asyncio.run(through_the_layer())["text"])
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
        [sys.executable, "-c", EVERY_CLIENT, key],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["hello"]
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
