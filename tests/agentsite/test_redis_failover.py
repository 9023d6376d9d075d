"""Through Redis Sentinel, every process follows a failover: the primary is killed for good,
the sentinels promote the replica, and the web server, the workers, the scheduler and
the channel layer carry on against it without a restart.

A real primary, replica and three sentinels on loopback ports of the test's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import redis
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.test import override_settings

from agentsite.core.redis_connections import channel_layer_host, sentinels_parse
from jobs.groups import owner_jobs_group
from jobs.models import Job
from sessions.models import Run
from sessions.worker import TURN_WORKER_ARGS
from tests.agentsite.test_outages import headers_for, send_message, start_job
from tests.conftest import Processes, wait_until
from tests.servers import OwnSentinels
from tests.sessions.test_stream_clients import daphne_serve

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
T = TypeVar("T")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[OwnSentinels]:
    servers = OwnSentinels(tmp_path)
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


class LayerListener:
    """A channel layer of the test's own, found through the sentinels, on a loop in a thread."""

    def __init__(self, cluster: OwnSentinels, prefix: str) -> None:
        sentinels, _ = sentinels_parse(cluster.sentinels)
        host = channel_layer_host(
            url="",
            sentinels=sentinels,
            master=cluster.MASTER,
            sentinel_password="",
            password="",
            db=0,
        )
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.layer = RedisPubSubChannelLayer(hosts=[host], prefix=f"{prefix}-ws")
        self.channel = ""
        self.group = ""
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.reader: asyncio.Task[None] | None = None

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def join(self, group: str) -> None:
        """Subscribe to ``group``; its messages gather in a queue, read by one task that is
        never cancelled (a cancelled ``receive`` drops the channel's subscription)."""

        async def join() -> None:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(group, self.channel)
            self.reader = asyncio.create_task(read())

        async def read() -> None:
            while True:
                self.queue.put_nowait(await self.layer.receive(self.channel))

        self.group = group
        self.run(join())

    def job_done(self, job_id: str, timeout: float = 30) -> dict[str, Any]:
        """The first ``job.update`` that says ``job_id`` is done."""

        async def wait() -> dict[str, Any]:
            while True:
                message = await self.queue.get()
                job = message.get("job", {})
                if job.get("job_id") == job_id and job.get("status") == Job.Status.DONE:
                    return message

        return self.run(asyncio.wait_for(wait(), timeout), timeout + 1)

    def resubscribed(self, timeout: float = 30) -> None:
        """Wait until a message sent to the group comes back: the subscription made before
        a failover is live on the new primary (what was published in between is gone)."""

        async def probe() -> None:
            while True:
                nonce = uuid.uuid4().hex
                try:
                    await self.layer.group_send(self.group, {"type": "probe", "nonce": nonce})
                except redis.RedisError:
                    await asyncio.sleep(0.2)  # not switched over yet
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1):
                        while (await self.queue.get()).get("nonce") != nonce:
                            pass
                        return

        self.run(asyncio.wait_for(probe(), timeout), timeout + 1)

    def close(self) -> None:
        if self.reader is not None:
            self.loop.call_soon_threadsafe(self.reader.cancel)
        self.run(self.layer.flush())
        self.loop.call_soon_threadsafe(self.loop.stop)


class SessionStream:
    """A session's server-sent events, read on a thread of their own."""

    def __init__(self, base: str, headers: dict[str, str], session_id: str) -> None:
        self.lines: list[str] = []
        self.opened = threading.Event()
        self.client = httpx.Client(timeout=httpx.Timeout(10, read=None))
        url = f"{base}/api/sessions/{session_id}/stream"
        self.thread = threading.Thread(target=self.read, args=(url, headers), daemon=True)
        self.thread.start()
        assert self.opened.wait(10), "the stream did not open"

    def read(self, url: str, headers: dict[str, str]) -> None:
        try:
            with self.client.stream("GET", url, headers=headers) as response:
                self.opened.set()
                for line in response.iter_lines():
                    self.lines.append(line)
        except httpx.HTTPError:
            pass  # closed by the test

    def said(self, *words: str) -> bool:
        return any(all(word in line for word in words) for line in list(self.lines))

    def close(self) -> None:
        self.client.close()


def test_jobs_and_live_updates_follow_a_sentinel_failover(
    processes: Processes, cluster: OwnSentinels, user: Any
) -> None:
    prefix = f"sentinel-{uuid.uuid4().hex}"
    # A follower with nothing to read re-reads the log only this rarely: what it
    # shows within the test's deadlines came through the channel layer.
    env = {**cluster.env(prefix), "AGENTSITE_SSE_HEARTBEAT_S": "600"}
    base = daphne_serve(processes, "daphne-sentinel", env=env)
    stack = [
        processes.start("sentinel-tools", "rqworker", "tools", "default", env=env),
        processes.start("sentinel-turns", *TURN_WORKER_ARGS, env=env),
        processes.start("sentinel-scheduler", "scheduler", env=env),
        processes.named("daphne-sentinel"),
    ]
    listener = LayerListener(cluster, prefix)
    streams: list[SessionStream] = []
    headers = headers_for(user)
    try:
        assert wait_until(
            lambda: httpx.get(f"{base}/healthz", timeout=5).status_code == 200, timeout=30
        )
        primary = redis.Redis(port=cluster.primary_port)
        assert primary.scard("rq:workers") >= 2  # the workers registered on the primary
        with override_settings(REDIS_PREFIX=prefix):  # the group as the stack names it
            listener.join(owner_jobs_group(user.pk))
        session = httpx.post(f"{base}/api/sessions", json={}, headers=headers, timeout=10).json()
        streams.append(SessionStream(base, headers, session["session_id"]))

        first = start_job(base, headers, "before-failover").json()["job_id"]
        assert listener.job_done(first)["job"]["job_id"] == first
        # Work in flight when the primary dies: one job running, others held for its slot.
        busy = [
            start_job(base, headers, f"busy-{i}", "sleepy", seconds=1, steps=10).json()["job_id"]
            for i in range(3)
        ]
        wait_until(lambda: Job.objects.filter(pk__in=busy, status=Job.Status.RUNNING).exists())

        cluster.kill_primary()
        wait_until(lambda: cluster.master_port() == cluster.replica_port, timeout=30)
        listener.resubscribed()

        # The web server, which never restarted, takes new work; a worker runs it; the
        # listener's subscription, made before the failover, hears it end.
        after = start_job(base, headers, "after-failover", session_id=session["session_id"])
        assert after.status_code == 202, after.text
        after_id = after.json()["job_id"]
        assert listener.job_done(after_id)["job"]["job_id"] == after_id
        # And the web server's stream, opened before the failover, shows it.
        assert wait_until(lambda: streams[0].said(after_id, '"status":"done"'), timeout=30)

        # No accepted job is lost: each one ends, and ends as it truly did.
        jobs = [first, *busy, after_id]
        wait_until(
            lambda: Job.objects.filter(pk__in=jobs, status__in=Job.TERMINAL).count() == len(jobs),
            timeout=30,
        )
        outcomes = list(Job.objects.filter(pk__in=jobs).values_list("status", "error_code"))
        assert {status for status, _ in outcomes} == {Job.Status.DONE}, outcomes
        # A model turn goes through the turn worker as before.
        reply = send_message(base, headers, session["session_id"], "hello after the failover")
        assert reply.status_code == 202, reply.text
        run = wait_until(
            lambda: Run.objects.filter(pk=reply.json()["run_id"], status__in=Run.TERMINAL).first(),
            timeout=30,
        )
        assert run.status == Run.Status.COMPLETED
        assert [proc.poll() for proc in stack] == [None] * len(stack)
        assert wait_until(
            lambda: httpx.get(f"{base}/healthz", timeout=5).status_code == 200, timeout=30
        )
    finally:
        for stream in streams:
            stream.close()
        listener.close()
        for proc in stack:
            processes.stop(proc)
