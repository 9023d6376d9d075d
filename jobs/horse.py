"""A work horse that runs one tool job after another: the warm horse of ``JobWorker``.

RQ forks a fresh work horse for every job. For a short tool job that fork is
most of the work: after it, every page the worker or the horse writes to takes
a copy-on-write fault, so most of the CPU a no-op job costs RQ's own worker and
horse is the fork (``bench/jobs.py`` measures both against a warm horse).
``JobWorker`` instead forks one horse and hands it tool jobs one at a time over
a pipe; the horse runs each exactly as a forked one would (RQ's
``perform_job``, then ``jobs.runner.run_job``) and answers when it is done.

A horse is still a process of its own, so everything that stops one works as
before: RQ's stop-job command, a forced stop, a cold shutdown and the worker's
watch past the job's RQ timeout kill it (its whole process group), and the next
job gets a fresh fork. It also retires
by itself, after answering, when reusing it would carry one job's leftovers
into the next:

- it has run ``AGENTSITE_JOB_HORSE_MAX_JOBS`` jobs (1: a fresh horse for every job),
- a job left a thread running or changed the working directory,
- its peak memory passed ``AGENTSITE_JOB_HORSE_MAX_RSS_MB``.

A horse whose worker is gone (the pipe is closed) finishes the job it has and
exits; ``run_job`` then records the outcome itself, as a forked horse does.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import random
import resource
import signal
import threading
import time
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from django.conf import settings
from rq.executions import Execution
from rq.worker.base import BaseWorker
from rq.worker.base import logger as rq_logger

from agentsite.compat import rq as rq_internals
from jobs import handoff
from jobs.models import Job

log = logging.getLogger(__name__)

# The ends of horse pipes this process holds: the worker's ends, or in a horse its
# own. Every process forked from here (a horse, RQ's horse for any other task, a
# tool's child) closes its copies at once: either side reads the end of the pipe as
# the other being gone, which must not wait for some other process to exit.
_PIPE_ENDS: weakref.WeakSet[Connection] = weakref.WeakSet()


def _pipe_ends_close() -> None:
    for conn in list(_PIPE_ENDS):
        conn.close()
    _PIPE_ENDS.clear()


os.register_at_fork(after_in_child=_pipe_ends_close)


@dataclass(frozen=True)
class Assignment:
    """What the worker tells its horse about the next job (the rest is in Redis)."""

    job_id: str
    execution_id: str
    queue_name: str
    started: Job | None  # the row the worker's start returned, None if it was refused
    outcome_file: str | None
    reader_pid: int


@dataclass(frozen=True)
class Answer:
    """The horse ran the job; ``retiring``: it exits now and is not to be given another."""

    job_id: str
    retiring: bool
    reason: str = ""


class WarmHorse:
    """The worker's handle on its horse: a process and the worker's end of their pipe."""

    def __init__(self, pid: int, conn: Connection) -> None:
        self.pid = pid
        self.conn = conn
        self.answer: Answer | None = None
        self._ended: tuple[int, int | None, Any] | None = None  # wait4's answer once it ended

    @classmethod
    def fork(cls, worker: BaseWorker) -> WarmHorse:
        ours, theirs = multiprocessing.Pipe(duplex=True)
        _PIPE_ENDS.add(ours)
        pid = os.fork()
        if pid == 0:  # the horse; the at-fork hook closed ``ours`` here
            try:
                _PIPE_ENDS.add(theirs)
                serve(worker, theirs)
            finally:
                os._exit(1)  # serve() only leaves through os._exit; this is a last resort
        theirs.close()
        return cls(pid, ours)

    def assign(self, assignment: Assignment) -> None:
        self.answer = None
        self.conn.send(assignment)

    def wait_answer(self, timeout: float) -> bool:
        """True once the horse answered or is gone (``answer`` says which), False on timeout."""
        if self.conn.poll(timeout):
            try:
                self.answer = self.conn.recv()
            except (EOFError, OSError):
                self.answer = None
            return True
        # No answer yet. The pipe's end tells of a dead horse at once; this is the
        # backstop should some process still hold the horse's end of it.
        ended = self._wait(os.WNOHANG)
        return ended is not None

    def reap(self) -> tuple[int, int | None, Any]:
        """Wait for the process to end (it was killed, died or retired): pid, status, rusage."""
        self.conn.close()
        ended = self._wait(0)
        assert ended is not None  # a blocking wait returns once it ended
        return ended

    def _wait(self, options: int) -> tuple[int, int | None, Any] | None:
        if self._ended is None:
            try:
                pid, status, rusage = os.wait4(self.pid, options)
            except ChildProcessError:  # reaped elsewhere (RQ's kill_horse and wait_for_horse)
                pid, status, rusage = self.pid, None, None
            if pid:
                self._ended = (pid, status, rusage)
        return self._ended

    def kill(self) -> None:
        """SIGKILL to the horse and what its tool started (its process group); reaped."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass  # gone already
        self.reap()

    def close(self, timeout: float = 5.0) -> None:
        """Let an idle horse go: it exits when its pipe closes. Killed if it lingers."""
        self.conn.close()
        deadline = time.monotonic() + timeout
        while self._wait(os.WNOHANG) is None:
            if time.monotonic() > deadline:
                self.kill()
                return
            time.sleep(0.02)


def serve(worker: BaseWorker, conn: Connection) -> None:
    """The horse's life: run each job the worker assigns, answer, retire when it should."""
    os.setpgrp()  # as RQ's horse: killing the horse kills what its tool started
    random.seed()
    worker.setup_work_horse_signals()  # type: ignore[no-untyped-call]
    rq_internals.become_horse(worker)
    worker.log = rq_logger
    os.environ["RQ_WORKER_ID"] = worker.name
    cwd = os.getcwd()
    max_jobs = settings.AGENTSITE_JOB_HORSE_MAX_JOBS
    max_rss_kib = settings.AGENTSITE_JOB_HORSE_MAX_RSS_MB * 1024
    served = 0
    while True:
        try:
            assignment: Assignment = conn.recv()
        except (EOFError, OSError):  # the worker closed the pipe or is gone
            os._exit(0)
        try:
            perform(worker, assignment)
        except BaseException:  # as RQ's horse: a failure outside the job's own handling
            log.exception("work horse failed around job %s", assignment.job_id)
            os._exit(1)
        served += 1
        reason = retire_reason(served, max_jobs, max_rss_kib, cwd)
        try:
            conn.send(Answer(job_id=assignment.job_id, retiring=bool(reason), reason=reason))
        except OSError:
            os._exit(0)
        if reason:
            os._exit(0)


def perform(worker: BaseWorker, assignment: Assignment) -> None:
    """One job, as a freshly forked horse would run it (``main_work_horse``)."""
    os.environ["RQ_JOB_ID"] = assignment.job_id
    handoff.STARTED_BY_WORKER.clear()
    handoff.STARTED_BY_WORKER[assignment.job_id] = assignment.started
    handoff.OUTCOME_FILE = assignment.outcome_file
    handoff.OUTCOME_READER_PID = assignment.reader_pid
    job = worker.job_class.fetch(
        assignment.job_id, connection=worker.connection, serializer=worker.serializer
    )
    queue = worker.queue_class(
        assignment.queue_name,
        connection=worker.connection,
        job_class=worker.job_class,
        serializer=worker.serializer,
        death_penalty_class=worker.death_penalty_class,
    )
    execution = Execution.fetch(assignment.execution_id, job.id, connection=worker.connection)
    rq_internals.attach_job(execution, job)
    worker.executions.clear()
    worker.execution = execution
    worker.perform_job(job, queue, execution)


def retire_reason(served: int, max_jobs: int, max_rss_kib: int, cwd: str) -> str:
    if served >= max_jobs:
        return f"served {served} jobs"
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
        return f"a job left threads running ({names})"
    try:
        if os.getcwd() != cwd:
            return "a job changed the working directory"
    except OSError:
        return "the working directory is gone"
    if resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > max_rss_kib:
        return f"its memory passed {settings.AGENTSITE_JOB_HORSE_MAX_RSS_MB} MB"
    return ""
