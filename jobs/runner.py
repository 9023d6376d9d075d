"""The one RQ entry point that runs any async tool, and the ToolContext it gets.

RQ forks a work horse per job. The horse runs the tool in its main thread and a
heartbeat thread beside it, which

- writes ``Job.heartbeat_at`` (the scheduler fails jobs whose heartbeat goes
  stale: the worker was lost),
- polls the Redis cancel key and the deadline, so ``ctx.cancelled`` turns true
  within a second,
- flushes throttled progress, and
- when the tool has not stopped a grace period after being told to, records
  the final state (``cancelled`` / ``timed_out``) and has RQ stop the horse
  (its stop-job command), so a tool that swallows every exception still ends.

A database restart costs the tool a wait, never the job: a partial result
waits for the database, progress and heartbeats are written at the next beat.

The final state is whatever happened first: a tool that returns before it is
forced out ends ``done`` even if a cancel arrived meanwhile; the lifecycle's
compare-and-set makes the loser of that race a no-op.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from agentsite.core.database import DATABASE_AWAY, through_database_outage
from agentsite.core.logcontext import logged_with
from jobs import lifecycle
from jobs.groups import cancel_key
from jobs.lifecycle import JobTransitionError
from jobs.live import redis_connection
from jobs.models import Job
from jobs.registry import ToolCancelled, get_tool

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.5
CANCEL_POLL_S = 0.2

# Connections inherited from the worker process across fork(). They are kept
# referenced and never closed: closing (or garbage-collecting) one would end
# the parent's database session. The horse leaves through os._exit, so no
# finaliser ever runs on them.
_INHERITED_CONNECTIONS: list[Any] = []


def connections_detach_inherited() -> None:
    """Make this process open its own database connections instead of sharing the parent's."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            _INHERITED_CONNECTIONS.append(conn.connection)
            conn.connection = None


# Jobs the worker process itself started just before forking this horse (see
# jobs.worker.JobWorker), with their rows; None when the start was refused.
STARTED_BY_WORKER: dict[str, Job | None] = {}
FINISHING_TRANSITIONS = {"job_succeed", "job_fail", "job_cancel", "job_time_out"}


# Under JobWorker: a private file, named by the worker before it forks this
# horse, where the horse leaves its outcome as well as returning it to RQ. The
# worker records the end from it, so a Redis outage while the tool runs costs
# the RQ bookkeeping, never the result.
OUTCOME_FILE: str | None = None
# The pid of that worker, noted before the fork: the horse compares its parent with
# it after the tool, to know whether anyone is left to read the outcome. (Reading
# the parent in the horse instead would race a worker killed during RQ's set-up.)
OUTCOME_READER_PID: int | None = None


# What the file holds once the horse has begun the job, before any outcome.
BEGUN = {"begun": True}


def outcome_leave(outcome: dict[str, Any] | None) -> None:
    if OUTCOME_FILE is not None:
        with open(OUTCOME_FILE, "wb") as f:
            pickle.dump(outcome, f)


def outcome_take(path: str) -> tuple[str, dict[str, Any] | None]:
    """What the horse left: ``("outcome", it)``, ``("begun", None)`` if it began the
    job and left no outcome (it died), ``("nothing", None)`` if it never began the
    job (RQ's set-up in the horse failed). Removes the file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if not data:
            return "nothing", None
        left = pickle.loads(data)
        return ("begun", None) if left == BEGUN else ("outcome", left)
    except (OSError, pickle.UnpicklingError, EOFError):
        return "begun", None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


@logged_with("job_id")
def run_job(job_id: str) -> dict[str, Any] | None:
    """RQ entry point on queue ``tools`` (the RQ job id is ``job_id``).

    Under ``JobWorker`` the worker process records the start and, from the
    returned outcome, the end, over its long-lived database connection; the
    horse then touches the database only for what the tool reports while it
    runs. Under any other worker the horse records both itself.
    """
    connections_detach_inherited()
    outcome_leave(BEGUN)
    try:
        execution = JobExecution(job_id)
        execution.run()
        outcome_leave(execution.outcome)
        if OUTCOME_FILE is not None and os.getppid() != OUTCOME_READER_PID:
            # The worker that forked this horse is gone (killed on its own): nobody
            # will read the outcome, so the horse records the end itself.
            log.warning("job %s: its worker is gone; recording the outcome here", job_id)
            through_database_outage(
                lambda: job_finish_in_worker(
                    job_id=job_id, outcome=execution.outcome, horse_status="finished"
                ),
                what=f"end of job {job_id}",
            )
        return execution.outcome
    finally:
        connections.close_all()


@logged_with("job_id")
def job_start_in_worker(*, job_id: str, worker_name: str, timeout_s: float | None = None) -> None:
    """In the worker process, before the fork: start the job (or note that it may not)."""
    STARTED_BY_WORKER.clear()
    try:
        STARTED_BY_WORKER[job_id] = lifecycle.job_start(
            job_id=job_id, worker_name=worker_name, timeout_s=timeout_s
        )
    except (JobTransitionError, Job.DoesNotExist) as exc:
        log.info("job %s not started: %s", job_id, exc)
        STARTED_BY_WORKER[job_id] = None


@logged_with("job_id")
def job_return_unstarted_in_worker(*, job_id: str) -> None:
    """In the worker process: the horse never began the job it started; queue it again.

    The job is forgotten only once this is recorded, so that a try that failed on
    the database can be made again.
    """
    if STARTED_BY_WORKER.get(job_id) is not None:
        try:
            lifecycle.job_return_unstarted(job_id=job_id)
        except JobTransitionError as exc:
            log.info("job %s not returned to the queue: %s", job_id, exc)
    STARTED_BY_WORKER.pop(job_id, None)


@logged_with("job_id")
def job_finish_in_worker(*, job_id: str, outcome: Any, horse_status: str) -> None:
    """In the worker process, after the horse: record the outcome it returned.

    No outcome means the horse died without one (killed, crashed); unless the
    job already ended (a forced stop records its own state), it failed. The job
    is forgotten only once its end is recorded, so that a try that failed on the
    database can be made again.
    """
    if STARTED_BY_WORKER.get(job_id) is not None:
        try:
            if isinstance(outcome, dict) and outcome.get("transition") in FINISHING_TRANSITIONS:
                getattr(lifecycle, outcome["transition"])(job_id=job_id, **outcome["kwargs"])
            else:
                lifecycle.job_fail(
                    job_id=job_id,
                    code="worker_lost",
                    message=f"The work horse ended without a result (RQ status {horse_status}).",
                )
        except JobTransitionError as exc:
            log.info("job %s already ended: %s", job_id, exc)
    STARTED_BY_WORKER.pop(job_id, None)


class StopReason:
    CANCEL = "cancel"
    DEADLINE = "deadline"


class RunnerToolContext:
    """The ToolContext of a job running in a work horse."""

    def __init__(self, job: Job) -> None:
        self.job_id: str | None = job.id
        self.owner_id: int | None = job.owner_id
        self.session_id: str | None = job.session_id
        self.deadline: datetime | None = job.deadline
        self.logger = logging.getLogger(f"jobs.tools.{job.tool}")
        self.stop_reason: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        # A job starts once (queued → running), so its partial results begin at 0.
        self._next_index = 0
        self._last_progress_at = 0.0
        self._pending_progress: tuple[float | None, str] | None = None

    # --- what tools call ---------------------------------------------------------

    def progress(self, fraction: float | None, message: str = "") -> None:
        with self._lock:
            self._pending_progress = (fraction, message)
            due = time.monotonic() - self._last_progress_at >= PROGRESS_INTERVAL_S
        if due:
            self.progress_flush()

    def partial(self, item: Any) -> int:
        json.dumps(item)  # refuse what the database could not store, in the tool's own frame
        with self._lock:
            index = self._next_index
            try:
                # A database restart costs the tool a wait, not the job.
                through_database_outage(
                    lambda: lifecycle.job_partial(job_id=self._job_id, index=index, item=item),
                    what=f"partial result {index} of job {self.job_id}",
                )
            except JobTransitionError:
                # The job already ended elsewhere (stopped, swept): nothing more to add.
                self.stop_reason = self.stop_reason or StopReason.CANCEL
                self._stop.set()
                raise ToolCancelled(self.stop_reason) from None
            self._next_index += 1
        return index

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def check_cancelled(self) -> None:
        if self._stop.is_set():
            raise ToolCancelled(self.stop_reason or StopReason.CANCEL)

    # --- what the runner calls ---------------------------------------------------

    @property
    def _job_id(self) -> str:
        assert self.job_id is not None
        return self.job_id

    def progress_flush(self) -> None:
        with self._lock:
            pending = self._pending_progress
            self._pending_progress = None
            if pending is None:
                return
            self._last_progress_at = time.monotonic()
        try:
            lifecycle.job_progress(job_id=self._job_id, fraction=pending[0], message=pending[1])
        except JobTransitionError:
            pass  # the job already ended; late progress is dropped
        except DATABASE_AWAY:
            # The database is away for a moment: the next flush writes it, unless newer
            # progress came meanwhile. Never the tool's problem.
            connections.close_all()
            with self._lock:
                if self._pending_progress is None:
                    self._pending_progress = pending

    def signal_stop(self, reason: str) -> bool:
        """Tell the tool to stop; True the first time."""
        with self._lock:
            if self._stop.is_set():
                return False
            self.stop_reason = reason
            self._stop.set()
            return True


class Heartbeat(threading.Thread):
    """Beside the tool: cancel and deadline watch and forced stop, plus a beat thread.

    The database writes (heartbeat, throttled progress) run in a thread of their
    own, so a slow or locked database never delays noticing a cancel request.
    That thread starts when the first beat is due (the start recorded one), so
    a job shorter than a beat costs one thread, not two.
    """

    def __init__(self, ctx: RunnerToolContext) -> None:
        super().__init__(name=f"watch-{ctx.job_id}", daemon=True)
        self.ctx = ctx
        self.finished = threading.Event()
        self.stop_signalled_at: float | None = None
        self.forced = False
        self.beat: threading.Thread | None = None

    def run(self) -> None:
        first_beat_at = time.monotonic() + settings.AGENTSITE_JOB_HEARTBEAT_S
        failing = False
        try:
            while not self.finished.wait(CANCEL_POLL_S):
                if self.beat is None and time.monotonic() >= first_beat_at:
                    self.beat = threading.Thread(
                        target=self.beat_loop, name=f"beat-{self.ctx.job_id}", daemon=True
                    )
                    self.beat.start()
                try:
                    self.watch()
                    failing = False
                except Exception:  # Redis away for a moment: look again at the next poll
                    if not failing:
                        log.exception("watch of %s failed", self.ctx.job_id)
                    failing = True
        finally:
            if self.beat is not None:
                self.beat.join(timeout=5)
            connections.close_all()

    def beat_loop(self) -> None:
        away = False
        try:
            while True:
                try:
                    self.ctx.progress_flush()
                    if not lifecycle.job_heartbeat(job_id=self.ctx._job_id):
                        self.ctx.signal_stop(StopReason.CANCEL)  # it ended elsewhere (swept)
                    away = False
                except DATABASE_AWAY as exc:
                    # A database restart: beat again, on a new connection, next time.
                    if not away:
                        log.warning(
                            "heartbeat of %s: database unavailable (%s)", self.ctx.job_id, exc
                        )
                    away = True
                    connections.close_all()
                if self.finished.wait(settings.AGENTSITE_JOB_HEARTBEAT_S):
                    break
        except Exception:
            log.exception("heartbeat of %s failed", self.ctx.job_id)
        finally:
            connections.close_all()

    def watch(self) -> None:
        ctx = self.ctx
        if not ctx.cancelled:
            # The client is made at the first poll: a job done sooner never needs it.
            if redis_connection().exists(cancel_key(ctx._job_id)):
                ctx.signal_stop(StopReason.CANCEL)
            elif ctx.deadline is not None and timezone.now() >= ctx.deadline:
                ctx.signal_stop(StopReason.DEADLINE)
            if ctx.cancelled:
                self.stop_signalled_at = time.monotonic()
                ctx.logger.info("job %s told to stop (%s)", ctx.job_id, ctx.stop_reason)
            return
        if self.stop_signalled_at is None or self.forced:
            return
        if time.monotonic() - self.stop_signalled_at >= settings.AGENTSITE_JOB_STOP_GRACE_S:
            self.forced = True
            self.force_stop()

    def force_stop(self) -> None:
        """The tool ignored the signal: record the final state, then have RQ kill this horse."""
        ctx = self.ctx
        grace = settings.AGENTSITE_JOB_STOP_GRACE_S
        try:
            if ctx.stop_reason == StopReason.DEADLINE:
                lifecycle.job_time_out(
                    job_id=ctx._job_id,
                    message=f"Still running {grace:g}s after its deadline; stopped.",
                )
            else:
                lifecycle.job_cancel(
                    job_id=ctx._job_id,
                    message=f"Did not stop within {grace:g}s of the cancel request; stopped.",
                )
        except JobTransitionError:
            return  # it finished first; that is the truth
        connections.close_all()
        stop_horse(ctx._job_id)


def stop_horse(job_id: str) -> None:
    """RQ's stop-job command; this process exits by itself if no worker acts on it."""
    from rq.command import send_stop_job_command

    try:
        send_stop_job_command(redis_connection(), job_id)
    except Exception:
        log.warning("stop-job command for %s failed", job_id, exc_info=True)
    if os.environ.get("RQ_JOB_ID") == job_id:
        time.sleep(5)
        os._exit(1)


class JobExecution:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        # The worker process started the job and records how it ends from ``outcome``.
        self.worker_finishes = job_id in STARTED_BY_WORKER
        self.outcome: dict[str, Any] | None = None

    def run(self) -> None:
        if self.worker_finishes:
            started = STARTED_BY_WORKER[self.job_id]
            if started is None:
                return
            job = started
        else:
            try:
                job = lifecycle.job_start(job_id=self.job_id, worker_name=worker_name())
            except JobTransitionError as exc:
                log.info("job %s not started: %s", self.job_id, exc)
                return
            except Job.DoesNotExist:
                return
        tool = get_tool(job.tool)
        if tool is None:
            self.end(lifecycle.job_fail, code="unknown_tool", message=f"No tool {job.tool!r}.")
            return
        try:
            args = tool.validate(job.args)
        except Exception as exc:
            self.end(lifecycle.job_fail, code="invalid_arguments", message=str(exc))
            return
        ctx = RunnerToolContext(job)
        heartbeat = Heartbeat(ctx)
        heartbeat.start()
        try:
            self.execute(tool.run, args, ctx)
        finally:
            heartbeat.finished.set()
            heartbeat.join(timeout=5)
            if ctx.cancelled:
                redis_connection().delete(cancel_key(self.job_id))

    def execute(self, run: Any, args: Any, ctx: RunnerToolContext) -> None:
        try:
            result = run(args, ctx)
        except ToolCancelled:
            self.end_stopped(ctx)
            return
        except BaseException as exc:
            if ctx.cancelled:
                self.end_stopped(ctx)  # the failure is how the tool reacted to the stop
                return
            ctx.logger.exception("tool of job %s raised", self.job_id)
            self.end(lifecycle.job_fail, code="tool_error", message=f"{type(exc).__name__}: {exc}")
            return
        ctx.progress_flush()
        if ctx.stop_reason == StopReason.DEADLINE:
            self.end(lifecycle.job_time_out)
            return
        try:
            json.dumps(result)
        except (TypeError, ValueError) as exc:
            self.end(lifecycle.job_fail, code="bad_result", message=f"Result is not JSON: {exc}")
            return
        self.end(lifecycle.job_succeed, result=result)

    def end_stopped(self, ctx: RunnerToolContext) -> None:
        if ctx.stop_reason == StopReason.DEADLINE:
            self.end(lifecycle.job_time_out)
        else:
            self.end(lifecycle.job_cancel, message="Stopped on request.")

    def end(self, transition: Any, **kwargs: Any) -> None:
        if self.worker_finishes:
            self.outcome = {"transition": transition.__name__, "kwargs": kwargs}
            return
        try:
            transition(job_id=self.job_id, **kwargs)
        except JobTransitionError as exc:
            log.info("job %s already ended: %s", self.job_id, exc)


def worker_name() -> str:
    return f"{os.environ.get('RQ_WORKER_ID', 'local')}/{os.getpid()}"


class InlineToolContext:
    """The ToolContext of a blocking tool run inline: nothing to publish, never cancelled."""

    def __init__(
        self, *, owner_id: int | None, session_id: str | None, timeout_s: float | None
    ) -> None:
        self.job_id: str | None = None
        self.owner_id = owner_id
        self.session_id = session_id
        self.deadline: datetime | None = (
            timezone.now() + timedelta(seconds=timeout_s) if timeout_s else None
        )
        self.logger = logging.getLogger("jobs.tools")
        self.items: list[Any] = []

    def progress(self, fraction: float | None, message: str = "") -> None:
        return None

    def partial(self, item: Any) -> int:
        self.items.append(item)
        return len(self.items) - 1

    @property
    def cancelled(self) -> bool:
        return self.deadline is not None and timezone.now() >= self.deadline

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise ToolCancelled("deadline")
