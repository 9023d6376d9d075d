"""The RQ worker class of agentsite (``RQ["WORKER_CLASS"]``).

RQ forks a work horse per job, and a horse is a fresh process: a database
connection opened there is opened for one job only. For tool jobs this worker
records the start before the fork and the end after it, over the worker's own
long-lived connection, so a short job costs the horse no database connection
at all. Every other job runs exactly as under RQ's ``Worker``, forked while
this process holds no database connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, connections
from rq import Queue, Worker
from rq.job import Job as RqJob

from jobs import runner

log = logging.getLogger(__name__)

RUN_JOB = "jobs.runner.run_job"


def with_reconnect(action: Callable[[], Any]) -> Any:
    """Run ``action``; if the long-lived connection went bad (a database restart), once more."""
    try:
        return action()
    except DatabaseError:
        connections.close_all()
        return action()


class JobWorker(Worker):
    def execute_job(self, job: RqJob, queue: Queue) -> None:
        if job.func_name != RUN_JOB or len(job.args) != 1:
            # Other tasks do not know to leave an inherited connection alone: fork
            # them without one (the next tool job reconnects).
            connections.close_all()
            super().execute_job(job, queue)
            return
        job_id = str(job.args[0])
        timeout_s = job.meta.get("timeout_s")
        with_reconnect(
            lambda: runner.job_start_in_worker(
                job_id=job_id, worker_name=self.name, timeout_s=timeout_s
            )
        )
        try:
            super().execute_job(job, queue)
        finally:
            try:
                status = job.get_status(refresh=True).value
                outcome = job.return_value(refresh=True) if status == "finished" else None
            except Exception:  # the RQ job expired or Redis went away: no outcome
                log.warning("no outcome for job %s", job_id, exc_info=True)
                status, outcome = "unknown", None
            with_reconnect(
                lambda: runner.job_finish_in_worker(
                    job_id=job_id, outcome=outcome, horse_status=status
                )
            )
