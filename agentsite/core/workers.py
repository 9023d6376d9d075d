"""What every RQ worker of agentsite shares: its main process outlives Redis.

The tool workers (``jobs.worker.JobWorker``) and the turn worker
(``sessions.worker.TurnWorker``) are built on ``RidesOutRedis``; the scheduler
waits out an outage with the same errors and backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from rq import Queue
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.exceptions import StopRequested
from rq.job import Job as RqJob
from rq.worker import BaseWorker, DequeueStrategy

from agentsite.compat import rq as rq_internals
from agentsite.core import telemetry

REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
OUTAGE_BACKOFF_MAX_S = 10.0
# How often a heartbeat also checks that Redis still lists the worker: often
# enough for /healthz after Redis came back empty, not a round trip per job.
REGISTRATION_CHECK_S = 2.0
# RQ's loop beats three times a job (before and after the dequeue, after the job), three
# round trips each, to keep a key alive for worker_ttl (minutes): a busy worker beats at
# most this often instead.
HEARTBEAT_EVERY_S = 1.0
# How often the loop looks whether the workers were suspended (``rq suspend``): a
# suspension takes effect within this long, where RQ looks before every job.
SUSPENSION_CHECK_S = 1.0
T = TypeVar("T")


def log_level_at_least_root(level: str | int | None) -> int:
    """``level`` (a name or a number; None, or a name logging does not know, is RQ's
    INFO), raised to the root logger's."""
    asked = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(asked, int):
        asked = logging.INFO
    return max(asked, logging.getLogger().getEffectiveLevel())


class RidesOutRedis(BaseWorker):
    """A worker whose main process outlives a Redis outage of any length.

    RQ's loop quits on the first Redis error outside its dequeue ("found an
    unhandled exception, quitting"). Here each of the loop's Redis steps waits
    for Redis with backoff instead. A heartbeat checks (at most every
    ``REGISTRATION_CHECK_S``) that Redis still lists the worker and registers it
    again if not (Redis came back empty, or was flushed), so ``/healthz`` and
    the dashboards see it at once. A worker's own heartbeat is sent at most every
    ``HEARTBEAT_EVERY_S``, however many jobs it takes in between. Heartbeats
    of running jobs are bookkeeping: a failed one is skipped, the job goes on.
    Stopping never waits long on RQ's command listener (``unsubscribe``).
    """

    def work(
        self,
        burst: bool = False,
        logging_level: str | None = None,
        date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
        log_format: str = DEFAULT_LOGGING_FORMAT,
        max_jobs: int | None = None,
        max_idle_time: int | None = None,
        with_scheduler: bool = False,
        dequeue_strategy: DequeueStrategy = DequeueStrategy.DEFAULT,
    ) -> bool:
        """RQ's loop, its loggers no chattier than ``LOG_LEVEL``.

        ``manage.py rqworker`` asks RQ for INFO at its default verbosity, which logs
        three lines for every job (its start, "Job OK", the result's TTL) even when
        ``LOG_LEVEL`` is WARNING: each formatted, written and, under ``manage.py
        serve``, read and written again. The root logger's level (``LOG_LEVEL``) is
        the floor; a DEBUG asked for with ``LOG_LEVEL=DEBUG`` stays DEBUG.
        """
        return super().work(
            burst,
            logging.getLevelName(log_level_at_least_root(logging_level)),
            date_format,
            log_format,
            max_jobs,
            max_idle_time,
            with_scheduler,
            dequeue_strategy,
        )

    def _through_outage(self, step: Callable[[], T]) -> T:
        wait = 0.5
        while True:
            try:
                result = step()
                if wait > 0.5:  # it had failed: Redis is back
                    telemetry.reconnect_count("redis")
                return result
            except REDIS_DOWN as exc:
                if rq_internals.stop_requested(self):
                    raise StopRequested() from exc
                self.log.warning(
                    "Worker %s: Redis unreachable (%s); retrying in %.1fs", self.name, exc, wait
                )
                time.sleep(wait)
                wait = min(wait * 2, OUTAGE_BACKOFF_MAX_S)

    _registration_checked_at = float("-inf")

    def _register_again_if_forgotten(self) -> None:
        if self.is_horse or rq_internals.stop_requested(self):
            return
        now = time.monotonic()
        if now - self._registration_checked_at < REGISTRATION_CHECK_S:
            return
        self._registration_checked_at = now
        if not self.connection.sismember(self.redis_workers_keys, self.key):
            self.connection.delete(self.key)
            self.register_birth()  # type: ignore[no-untyped-call]  # RQ is unannotated
            self.log.info("Worker %s: Redis had forgotten this worker; registered again", self.name)

    _beat_at = float("-inf")

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:  # part of a bigger write, whose caller handles errors
            super().heartbeat(timeout, pipeline)
            return
        now = time.monotonic()
        if timeout is None and now - self._beat_at < HEARTBEAT_EVERY_S:
            return

        def beat() -> None:
            super(RidesOutRedis, self).heartbeat(timeout)
            self._register_again_if_forgotten()

        self._through_outage(beat)
        self._beat_at = now

    _suspension_checked_at = float("-inf")

    def check_for_suspension(self, burst: bool) -> None:
        """RQ's look for ``rq suspend``, at most every ``SUSPENSION_CHECK_S``: RQ's loop
        looks before every dequeue, a round trip for each job (a turn worker takes
        several a second)."""
        if time.monotonic() - self._suspension_checked_at < SUSPENSION_CHECK_S:
            return
        self._through_outage(lambda: super(RidesOutRedis, self).check_for_suspension(burst))
        self._suspension_checked_at = time.monotonic()

    def run_maintenance_tasks(self) -> None:
        self._through_outage(
            lambda: super(RidesOutRedis, self).run_maintenance_tasks()  # type: ignore[no-untyped-call]
        )

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[RqJob, Queue] | None:
        return self._through_outage(
            lambda: super(RidesOutRedis, self).dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        )

    def _shutdown(self) -> None:
        """RQ's warm shutdown, with the stop marked even when no job is running.

        RQ's signal handler raises ``StopRequested`` wherever an idle worker's main
        process is. A handler there that logs a failure and goes on (the live update
        published at a job's end, ``jobs.live.group_send``) caught it, and the worker
        ran on until it was killed. Marked first, RQ's loop stops at its next turn.
        """
        rq_internals.request_stop(self)
        super()._shutdown()  # type: ignore[no-untyped-call]  # RQ is unannotated

    def maintain_heartbeats(self, job: RqJob, execution: Any) -> None:
        try:
            super().maintain_heartbeats(job, execution)
        except REDIS_DOWN as exc:
            self.log.warning("Worker %s: heartbeat of job %s skipped (%s)", self.name, job.id, exc)

    def unsubscribe(self) -> None:
        """Stop listening for RQ's worker commands, in about a second at most.

        RQ unsubscribes, then stops the listener thread, whose ``stop()`` (redis-py
        8.2) waits for it without a limit. A listener that read the unsubscribe
        reply before that stop sleeps in ``get_message`` for up to RQ's 60 s
        ``sleep_time``, so a worker asked to stop took up to a minute more to exit,
        past the patience of most process managers. Here the listener is told to
        end first, so the reply wakes a thread that then ends; the wait for it is
        bounded, and it is a daemon thread either way. A listener that ends first
        closes the connection, and the UNSUBSCRIBE written meanwhile fails: that is
        no failure of the stop.
        """
        listener = self.pubsub_thread
        if listener is None:
            return
        channel = self.pubsub_channel_name
        self.log.info("Worker %s: unsubscribing from channel %s", self.name, channel)
        listener.stop(timeout=0)
        try:
            self.pubsub.unsubscribe()
        except REDIS_DOWN as exc:
            # The listener, told to stop, may close the connection while the UNSUBSCRIBE
            # is being written ("Bad file descriptor"): closed, it is subscribed to nothing.
            self.log.info("Worker %s: unsubscribe not sent (%s)", self.name, exc)
        finally:
            listener.join(timeout=1)
            if listener.is_alive():  # it closes the connection itself when it ends
                self.pubsub.close()

    def teardown(self) -> None:
        try:
            super().teardown()  # type: ignore[no-untyped-call]  # RQ is unannotated
        except REDIS_DOWN as exc:  # stopping during an outage: Redis drops us by TTL
            self.log.warning("Worker %s: could not register its end (%s)", self.name, exc)
