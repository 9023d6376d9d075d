"""A busy worker beats at most every HEARTBEAT_EVERY_S, not three times a job; a beat
with a timeout of its own, and one that is due, still go to Redis."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator

import pytest
from django.conf import settings
from redis import Redis
from rq import Queue
from rq.exceptions import StopRequested
from rq.worker import SimpleWorker

from agentsite.core.workers import HEARTBEAT_EVERY_S, SUSPENSION_CHECK_S, RidesOutRedis


class Worker(RidesOutRedis, SimpleWorker):
    pass


@pytest.fixture
def worker() -> Iterator[Worker]:
    connection = Redis.from_url(settings.REDIS_URL)
    worker = Worker([Queue("heartbeat-test", connection=connection)], connection=connection)
    worker.register_birth()  # type: ignore[no-untyped-call]
    yield worker
    worker.register_death()  # type: ignore[no-untyped-call]
    connection.close()


def last_beat(worker: Worker) -> bytes | None:
    value = worker.connection.hget(worker.key, "last_heartbeat")
    return value if isinstance(value, bytes) else None


def test_beats_in_quick_succession_send_one(worker: Worker) -> None:
    worker.heartbeat()
    first = last_beat(worker)
    assert first is not None
    for _ in range(30):  # ten jobs' worth of RQ's loop
        worker.heartbeat()
    assert last_beat(worker) == first


def test_a_due_beat_is_sent(worker: Worker) -> None:
    worker.heartbeat()
    first = last_beat(worker)
    worker._beat_at -= HEARTBEAT_EVERY_S + 60  # as if the last beat were long ago
    worker.heartbeat()
    assert last_beat(worker) != first


def test_a_beat_with_its_own_timeout_is_always_sent(worker: Worker) -> None:
    worker.heartbeat()
    worker.heartbeat(timeout=4321)
    assert 4300 < worker.connection.ttl(worker.key) <= 4321


def test_a_stop_request_caught_by_a_handler_still_stops_the_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """RQ's signal handler raises StopRequested wherever an idle worker's main process is.
    Caught there by a handler that logs and goes on (the live update published at a job's
    end), the request was lost, and the worker waited for work until it was killed."""
    connection = Redis.from_url(settings.REDIS_URL)
    worker = Worker([Queue("stop-test", connection=connection)], connection=connection)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            worker.request_stop(signal.SIGTERM, None)  # as the signal runs it: the worker idle
        except StopRequested:
            pass  # what jobs.live.group_send's "except Exception" did with it
        with caplog.at_level(logging.INFO, logger="rq.worker"):
            # Without the stop, the loop would wait for work and quit only when idle.
            worker.work(burst=False, max_idle_time=3)
        assert "stopping on request" in caplog.text
        assert "idle for" not in caplog.text
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        connection.close()


def test_the_suspension_is_looked_up_at_most_once_a_second(worker: Worker) -> None:
    # RQ looked before every dequeue: a round trip for each job.
    from rq.suspension import resume, suspend

    worker.check_for_suspension(burst=True)  # not suspended: goes on
    suspend(worker.connection)
    try:
        worker.check_for_suspension(burst=True)  # within the second: not looked up again
        worker._suspension_checked_at -= SUSPENSION_CHECK_S
        with pytest.raises(StopRequested):  # RQ's answer to a suspension in burst mode
            worker.check_for_suspension(burst=True)
    finally:
        resume(worker.connection)
