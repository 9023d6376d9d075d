"""A stream whose Redis went away and came back re-reads the log at once.

What was published while the web server's subscription was down is gone; the
feed learns of the reconnect (``agentsite.core.fanout``) and its followers
re-read the log from their cursors, instead of waiting for the next idle tick.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest

from sessions.events import event_append
from tests.agentsite.test_outages import headers_for, start_job
from tests.agentsite.test_redis_failover import SessionStream
from tests.conftest import Processes, wait_until
from tests.servers import OwnRedis
from tests.sessions.test_stream_clients import daphne_serve

pytestmark = pytest.mark.django_db(transaction=True)


def event_ids(stream: SessionStream) -> list[str]:
    return [line[3:].strip() for line in list(stream.lines) if line.startswith("id:")]


def test_an_event_logged_while_redis_was_away_reaches_the_stream_when_it_is_back(
    processes: Processes, own_redis: OwnRedis, user: Any
) -> None:
    env = {
        "REDIS_URL": own_redis.url,
        "AGENTSITE_REDIS_PREFIX": f"restart-{uuid.uuid4().hex}",
        # The idle re-read comes only this rarely: what the stream shows within the
        # test's deadlines came live, or through the re-read a reconnect prompts.
        "AGENTSITE_SSE_HEARTBEAT_S": "600",
    }
    base = daphne_serve(processes, "daphne-redis-restart", env=env)
    tools = processes.start("redis-restart-tools", "rqworker", "tools", "default", env=env)
    headers = headers_for(user)
    stream: SessionStream | None = None
    try:
        session = httpx.post(f"{base}/api/sessions", json={}, headers=headers, timeout=10).json()
        stream = SessionStream(base, headers, session["session_id"])
        # Live before the outage: a job's end, published by the worker through this Redis.
        before = start_job(base, headers, "before", session_id=session["session_id"])
        before_id = before.json()["job_id"]
        assert wait_until(lambda: stream.said(before_id, '"status":"done"'), timeout=30)

        own_redis.kill()
        # Logged while Redis is away (this process publishes elsewhere: daphne hears
        # nothing of it, whatever happens to its subscription).
        text = f"logged-in-the-gap-{uuid.uuid4().hex}"
        event_append(
            session_id=session["session_id"], kind="assistant_delta", payload={"text": text}
        )
        time.sleep(2)  # the subscription has seen its connection drop
        own_redis.start()  # empty

        assert wait_until(lambda: stream.said(text), timeout=30)
        ids = event_ids(stream)
        assert len(ids) == len(set(ids)), ids  # nothing repeated by the re-read
        # The subscription is live again: a job's end after the restart arrives too.
        after = start_job(base, headers, "after", session_id=session["session_id"])
        assert after.status_code == 202, after.text
        after_id = after.json()["job_id"]
        assert wait_until(lambda: stream.said(after_id, '"status":"done"'), timeout=30)
        ids = event_ids(stream)
        assert len(ids) == len(set(ids)), ids
        frames = [json.loads(line[5:]) for line in list(stream.lines) if line.startswith("data:")]
        seqs = [frame["seq"] for frame in frames if "seq" in frame]
        assert seqs == sorted(seqs) and len(seqs) == len(set(seqs)), seqs
        assert tools.poll() is None
    finally:
        if stream is not None:
            stream.close()
        processes.stop(tools)
