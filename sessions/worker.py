"""The turn worker: RQ's queue feeds many concurrent model turns in one process.

``manage.py rqworker turns --worker-class sessions.worker.TurnWorker``

RQ stays the source of work: the worker dequeues from ``turns`` as any RQ
worker does, registers itself, keeps the started registry and records each
job's end. But it forks no work horse. A ``run_turn`` job becomes a task on
the event loop of a ``TurnThread`` (``sessions.runtime``), and the main
thread goes straight back to the queue until ``AGENTSITE_TURN_CONCURRENCY``
turns are in flight. Any other job on ``turns`` (none of agentsite's own: the
scheduler runs its passes itself) runs in a small thread pool of its own, so it
never holds up a turn.

Stopping (SIGTERM or Ctrl-C): the worker takes no new turns, lets the running
ones finish for ``AGENTSITE_TURN_STOP_GRACE_S``, then hands back the rest:
each run returns to ``queued`` (``sessions.runs.run_hand_back``) and is put at
the front of the queue for the next worker. A second signal hands back at once.
A worker killed outright leaves its runs to the reaper, which fails them all
once their shared heartbeat goes stale.
"""

from __future__ import annotations

import concurrent.futures
import faulthandler
import logging
import threading
import time
from typing import Any

from django.conf import settings
from rq import Queue
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job as RqJob
from rq.timeouts import TimerDeathPenalty
from rq.worker import SimpleWorker

from agentsite.compat import rq as rq_internals
from agentsite.core.database import connections_keep_if_sound
from agentsite.core.workers import REDIS_DOWN, RidesOutRedis
from sessions.loop import HANDED_BACK
from sessions.runs import RUN_TURN, run_enqueue
from sessions.runtime import TurnRuntime, TurnThread

log = logging.getLogger(__name__)

# How often the RQ-side heartbeats of in-flight jobs are renewed.
RQ_BEAT_S = 30.0


class TurnWorker(RidesOutRedis, SimpleWorker):
    # Housekeeping jobs run in threads, where SIGALRM cannot reach them.
    death_penalty_class = TimerDeathPenalty

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = threading.BoundedSemaphore(settings.AGENTSITE_TURN_CONCURRENCY)
        self.engine = TurnThread(TurnRuntime())
        self.chores = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="turn-chore")
        # RQ bookkeeping (Redis) at a job's end, off the event loop.
        self.closer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="turn-rq")
        self.in_flight: dict[str, tuple[RqJob, Execution]] = {}
        self.in_flight_lock = threading.Lock()
        self.started = False
        self.dequeuing = False
        self.hand_back_now = False

    # --- taking work -----------------------------------------------------------------

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[RqJob, Queue] | None:
        """Wait for a free slot, then dequeue as RQ does."""
        if not self.started:
            # Started here, after RQ's own set-up, so no fork ever copies the loop thread.
            self.engine.start()
            threading.Thread(target=self._beat_rq, name="turn-rq-beat", daemon=True).start()
            self.started = True
        while not self.slots.acquire(timeout=1.0):
            self.heartbeat()
            if rq_internals.stop_requested(self):
                raise StopRequested()
        self.dequeuing = True
        try:
            if rq_internals.stop_requested(self):
                # The signal came after RQ's last look and before ``dequeuing``: it could
                # not interrupt, and the wait for a job below may last minutes.
                raise StopRequested()
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        except BaseException:
            self.slots.release()
            raise
        finally:
            self.dequeuing = False
        if result is None:
            self.slots.release()
        return result

    def execute_job(self, job: RqJob, queue: Queue) -> None:
        is_turn = job.func_name == RUN_TURN and len(job.args) == 1
        try:
            execution = self.prepare_execution(job)
            if is_turn:  # a chore's perform_job prepares itself, in its thread
                self.prepare_job_execution(
                    job, remove_from_intermediate_queue=len(self.queues) == 1
                )
        except REDIS_DOWN as exc:
            # Dequeued, then Redis went away: the run is still queued in the
            # database, and the reaper hands it to RQ again once Redis is back.
            self.slots.release()
            log.warning("Worker %s: could not start job %s (%s)", self.name, job.id, exc)
            return
        except BaseException:
            self.slots.release()
            raise
        if not is_turn:
            self.chores.submit(self._chore, job, queue, execution)
            return
        with self.in_flight_lock:
            self.in_flight[job.id] = (job, execution)
        future = self.engine.submit(str(job.args[0]))
        future.add_done_callback(
            lambda done: self.closer.submit(self._close, job, queue, execution, done)
        )

    def _chore(self, job: RqJob, queue: Queue, execution: Execution) -> None:
        try:
            self.perform_job(job, queue, execution)
        finally:
            # The two chore threads keep their connection from one job to the next,
            # unless it failed.
            connections_keep_if_sound()
            self.slots.release()

    def _close(
        self,
        job: RqJob,
        queue: Queue,
        execution: Execution,
        done: concurrent.futures.Future[str],
    ) -> None:
        """Record a turn's end in RQ; a handed-back run goes to the front of the queue."""
        try:
            error = done.exception()
            if error is None:
                outcome = done.result()
                rq_internals.finalize_success(self, job, queue, execution, outcome)
                if outcome == HANDED_BACK:
                    run_enqueue(str(job.args[0]), at_front=True)
            else:
                rq_internals.finalize_failure(
                    self, job, queue, execution, (type(error), error, None)
                )
        except Exception:
            # The run's truth is in the database; a lost RQ record only costs bookkeeping,
            # and the reaper hands a handed-back run to RQ again if this enqueue failed.
            log.warning("could not record the end of turn %s in RQ", job.id, exc_info=True)
        finally:
            with self.in_flight_lock:
                self.in_flight.pop(job.id, None)
            self.slots.release()

    def _beat_rq(self) -> None:
        """Keep RQ's started registry from declaring long turns abandoned."""
        while True:
            time.sleep(RQ_BEAT_S)
            with self.in_flight_lock:
                jobs = list(self.in_flight.values())
            for job, execution in jobs:
                try:
                    self.maintain_heartbeats(job, execution)
                except Exception:
                    log.debug("RQ heartbeat of %s failed", job.id, exc_info=True)

    # --- stopping ------------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Warm shutdown: stop taking turns; ``teardown`` lets the running ones end."""
        rq_internals.request_stop(self)
        self.set_shutdown_requested_date()  # type: ignore[no-untyped-call]  # RQ is unannotated
        if self.dequeuing:
            raise StopRequested()

    def request_force_stop(self, signum: int, frame: Any) -> None:
        """A second signal: hand every running turn back now instead of waiting."""
        if self.busy:
            log.warning("Worker %s: handing back %d turns now", self.name, self.busy)
            self.hand_back_now = True
            return
        super().request_force_stop(signum, frame)

    @property
    def busy(self) -> int:
        with self.in_flight_lock:
            return len(self.in_flight)

    def _wait_for_turns(self, limit_s: float | None, *, until_hand_back: bool = False) -> None:
        deadline = None if limit_s is None else time.monotonic() + limit_s
        while self.busy and not (until_hand_back and self.hand_back_now):
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(0.05)

    def teardown(self) -> None:
        if not self.is_horse and self.started:
            self.drain()
        super().teardown()

    def drain(self) -> None:
        grace = settings.AGENTSITE_TURN_STOP_GRACE_S
        began = time.monotonic()
        if self.busy:
            log.info("Worker %s: waiting up to %gs for %d turns", self.name, grace, self.busy)
        # Stopped on request: a grace period. Out of work (--burst, --max-jobs): no limit.
        self._wait_for_turns(
            grace if rq_internals.stop_requested(self) else None, until_hand_back=True
        )
        if self.busy:
            log.info("Worker %s: handing back %d turns", self.name, self.busy)
            self.engine.hand_back_all("worker_shutdown")
            self._wait_for_turns(15.0)
            if self.busy:
                # A handed-back turn ends within moments unless something holds it:
                # say where every thread is before the loop is closed under it.
                log.warning(
                    "Worker %s: %d turns did not end after their hand-back; threads follow",
                    self.name,
                    self.busy,
                )
                faulthandler.dump_traceback(all_threads=True)
        turns_s = time.monotonic() - began
        self.closer.shutdown(wait=True)
        self.chores.shutdown(wait=True, cancel_futures=True)
        chores_s = time.monotonic() - began - turns_s
        self.engine.close()
        log.info(
            "Worker %s: drained in %.1fs (turns %.1fs, RQ records and chores %.1fs, loop %.1fs)",
            self.name,
            time.monotonic() - began,
            turns_s,
            chores_s,
            time.monotonic() - began - turns_s - chores_s,
        )


# How every launcher (``serve``, the tests, the benchmarks) starts a turn worker.
TURN_WORKER_ARGS = ("rqworker", "turns", "--worker-class", "sessions.worker.TurnWorker")
