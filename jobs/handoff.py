"""What passes between a tool worker and the work horse that runs a job for it.

Under ``jobs.worker.JobWorker`` the worker process records a job's start
before it hands the job to its horse (``jobs.horse``) and its end after, over
its own long-lived database connection; the horse only runs the tool. This
module holds both sides of that hand-off: the jobs the worker started
(``STARTED_BY_WORKER``), the outcome file the horse leaves, and the worker's
``job_*_in_worker`` steps. It also keeps the horse off the connections it
inherits across ``fork()``.
"""

from __future__ import annotations

import logging
import os
import pickle
from typing import Any

from django.db import connections

from agentsite.core.logcontext import logged_with
from jobs import lifecycle
from jobs.lifecycle import JobTransitionError
from jobs.models import Job

log = logging.getLogger(__name__)

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


# Jobs the worker process itself started just before handing them to this horse
# (see jobs.worker.JobWorker), with their rows; None when the start was refused.
STARTED_BY_WORKER: dict[str, Job | None] = {}
FINISHING_TRANSITIONS = {"job_succeed", "job_fail", "job_cancel", "job_time_out"}


# Under JobWorker: a private file, named by the worker for each job it hands to
# this horse, where the horse leaves its outcome as well as returning it to RQ. The
# worker records the end from it, so a Redis outage while the tool runs costs
# the RQ bookkeeping, never the result.
OUTCOME_FILE: str | None = None
# The pid of that worker, noted by the worker itself: the horse compares its parent
# with it after the tool, to know whether anyone is left to read the outcome. (Reading
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
def job_start_in_worker(*, job_id: str, worker_name: str, timeout_s: float | None = None) -> None:
    """In the worker process, before the fork: start the job (or note that it may not)."""
    STARTED_BY_WORKER.clear()
    try:
        STARTED_BY_WORKER[job_id] = lifecycle.job_start(
            job_id=job_id, worker_name=worker_name, timeout_s=timeout_s
        )
    except (JobTransitionError, Job.DoesNotExist) as exc:
        # Started already, by this very worker: a try whose commit reached the database
        # and whose answer was lost with it (a failover), made again. The job is ours to
        # run; refusing it would leave it running with nobody running it.
        running = Job.objects.filter(id=job_id, status=Job.Status.RUNNING)
        ours = running.filter(worker_name=worker_name[:200]).first() if worker_name else None
        STARTED_BY_WORKER[job_id] = ours
        if STARTED_BY_WORKER[job_id] is None:
            log.info("job %s not started: %s", job_id, exc)


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
