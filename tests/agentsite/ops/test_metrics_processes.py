"""/metrics across processes: queues in Redis, streams of other web processes, outages.

Real web servers (daphne) and a real worker; the Redis outage test runs its
own redis-server, which it kills and starts again empty.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect as websocket_connect
from websockets.typing import Subprotocol

from tests.agentsite.ops.scrape import Samples, samples_of, value
from tests.agentsite.test_outages import headers_for, start_job
from tests.conftest import ARTIFACTS, Processes, wait_for_idle_workers, wait_until
from tests.servers import OwnRedis
from tests.sessions.test_stream_clients import daphne_running, daphne_serve

pytestmark = pytest.mark.django_db(transaction=True)


def scrape(base: str, headers: dict[str, str]) -> Samples:
    response = httpx.get(f"{base}/metrics", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    return samples_of(response.text)


def test_queues_come_from_redis_and_a_redis_outage_is_reported_not_failed(
    processes: Processes, own_redis: OwnRedis, user: Any, make_user: Any, no_scheduler: None
) -> None:
    # This test's tool jobs must stay held or in its own Redis: neither the sweep nor
    # the end of an earlier test's job (which hands freed slots over) may take them.
    wait_for_idle_workers("tools")
    env = {"REDIS_URL": own_redis.url, "AGENTSITE_REDIS_PREFIX": f"metrics-{uuid.uuid4().hex}"}
    base = daphne_serve(processes, "daphne-metrics-redis", env=env)
    operator = headers_for(make_user("operator", is_staff=True))
    # A worker on another queue only: the tool jobs stay queued, and it rides out the outage.
    log_path = ARTIFACTS / "metrics-default-worker.log"
    log_start = log_path.stat().st_size if log_path.exists() else 0

    def worker_log() -> bytes:
        return log_path.read_bytes()[log_start:]

    worker = processes.start("metrics-default-worker", "rqworker", "default", env=env)
    try:
        for n in range(3):
            assert start_job(base, headers_for(user), f"queued-{n}").status_code == 202

        waiting = wait_until(
            lambda: (
                (s := scrape(base, operator))
                and (value(s, "agentsite_queue_oldest_age_seconds", queue="tools") or 0) >= 0.5
                and s
            )
        )
        assert value(waiting, "agentsite_redis_up") == 1
        # A tool job waits in RQ once a worker slot is free, until then in the database.
        in_rq = value(waiting, "agentsite_queue_depth", queue="tools")
        held = value(waiting, "agentsite_jobs_held")
        assert in_rq is not None and in_rq >= 1 and held is not None
        assert in_rq + held == 3
        assert value(waiting, "agentsite_queue_depth", queue="turns") == 0
        assert jobs_counted(waiting) == 3
        wait_until(lambda: b"Listening on" in worker_log(), timeout=30)

        own_redis.kill()
        during = scrape(base, operator)
        assert value(during, "agentsite_redis_up") == 0
        assert value(during, "agentsite_queue_depth", queue="tools") is None
        assert value(during, "agentsite_database_up") == 1
        assert jobs_counted(during) == 3
        # The worker noticed (RQ's own dequeue retries a first time unseen).
        wait_until(lambda: b"Redis unreachable" in worker_log(), timeout=30)

        own_redis.start()  # empty
        after = wait_until(
            lambda: (
                (s := scrape(base, operator))
                and value(s, "agentsite_reconnects_total", store="redis")
                and s
            ),
            timeout=30,
        )
        assert value(after, "agentsite_redis_up") == 1
        assert value(after, "agentsite_queue_depth", queue="tools") == 0  # Redis came back empty
    finally:
        processes.stop(worker)
        processes.stop(processes.named("daphne-metrics-redis"))


def bearer_subprotocols(token: str) -> list[Subprotocol]:
    return [Subprotocol("agentsite"), Subprotocol(f"agentsite.bearer.{token}")]


def jobs_counted(samples: Samples) -> float:
    """Jobs of every status (a scheduler of another test may hand these to its own workers)."""
    return sum(v for (name, _), v in samples.items() if name == "agentsite_jobs")


def test_open_streams_of_another_web_process_are_counted(
    processes: Processes, user: Any, make_user: Any
) -> None:
    with (
        daphne_running(processes, "daphne-metrics-streams") as streaming,
        daphne_running(processes, "daphne-metrics-answers") as answering,
    ):
        _streams_counted(streaming, answering, user, make_user)


def _streams_counted(streaming: str, answering: str, user: Any, make_user: Any) -> None:
    operator = headers_for(make_user("operator", is_staff=True))
    headers = headers_for(user)
    session = httpx.post(f"{streaming}/api/sessions", json={}, headers=headers, timeout=10).json()
    session_id = session["session_id"]

    def open_streams() -> dict[str, float | None]:
        samples = scrape(answering, operator)
        kinds = ("sse", "websocket")
        return {kind: value(samples, "agentsite_open_streams", kind=kind) for kind in kinds}

    assert open_streams() == {"sse": 0, "websocket": 0}
    token = headers["Authorization"].removeprefix("Bearer ")
    ws_url = streaming.replace("http://", "ws://") + f"/ws/sessions/{session_id}/"
    with (
        httpx.stream(
            "GET", f"{streaming}/api/sessions/{session_id}/stream", headers=headers, timeout=30
        ) as sse,
        websocket_connect(ws_url, subprotocols=bearer_subprotocols(token), open_timeout=10),
    ):
        assert sse.status_code == 200
        wait_until(lambda: open_streams() == {"sse": 1, "websocket": 1}, timeout=20)
    wait_until(lambda: open_streams() == {"sse": 0, "websocket": 0}, timeout=20)


def test_a_web_process_that_stops_takes_its_open_streams_out_of_the_count(
    processes: Processes, user: Any, make_user: Any
) -> None:
    """Its streams end with it: the other web processes stop counting them at once, not
    after its last published count has gone stale."""
    operator = headers_for(make_user("operator", is_staff=True))
    headers = headers_for(user)
    with daphne_running(processes, "daphne-metrics-remaining") as remaining:
        leaving = daphne_serve(processes, "daphne-metrics-leaving")
        session = httpx.post(f"{leaving}/api/sessions", json={}, headers=headers, timeout=10)
        stream_url = f"{leaving}/api/sessions/{session.json()['session_id']}/stream"

        def open_sse() -> float | None:
            return value(scrape(remaining, operator), "agentsite_open_streams", kind="sse")

        with httpx.stream("GET", stream_url, headers=headers, timeout=30) as sse:
            assert sse.status_code == 200
            wait_until(lambda: open_sse() == 1, timeout=20)
            processes.stop(processes.named("daphne-metrics-leaving"))
            assert open_sse() == 0
