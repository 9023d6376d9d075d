"""The one RQ entry point that runs any async tool: ``run_job``.

``run_job`` runs in a work horse: one RQ forked for the job, or under
``jobs.worker.JobWorker`` the worker's warm horse, which runs one job after
another (``jobs.horse``), so it leaves no state behind it. It starts the job (or
finds it started by the worker, see ``jobs.handoff``), runs the tool with a
``JobToolContext`` (``jobs.tools.context``) and the heartbeat beside it
(``jobs.heartbeat``), and ends the job with whatever happened first: a tool
that returns before it is forced out ends ``done`` even if a cancel arrived
meanwhile; the lifecycle's compare-and-set makes the loser of that race a no-op.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from django.db import connections

from agentsite.core.database import through_database_outage
from agentsite.core.logcontext import logged_with
from jobs import handoff, lifecycle
from jobs.groups import cancel_key
from jobs.heartbeat import Heartbeat
from jobs.lifecycle import JobTransitionError
from jobs.live import redis_connection
from jobs.models import Job
from jobs.registry import ToolCancelled, get_tool
from jobs.tools.context import JobToolContext, StopReason
from jobs.tools.workspace_paths import server_paths_hidden, tool_error_message

log = logging.getLogger(__name__)


@logged_with("job_id")
def run_job(job_id: str) -> dict[str, Any] | None:
    """RQ entry point on queue ``tools`` (the RQ job id is ``job_id``).

    Under ``JobWorker`` the worker process records the start and, from the
    returned outcome, the end, over its long-lived database connection; the
    horse then touches the database only for what the tool reports while it
    runs. Under any other worker the horse records both itself.
    """
    handoff.connections_detach_inherited()
    handoff.outcome_leave(handoff.BEGUN)
    try:
        execution = JobExecution(job_id)
        execution.run()
        handoff.outcome_leave(execution.outcome)
        if handoff.OUTCOME_FILE is not None and os.getppid() != handoff.OUTCOME_READER_PID:
            # The worker that forked this horse is gone (killed on its own): nobody
            # will read the outcome, so the horse records the end itself.
            log.warning("job %s: its worker is gone; recording the outcome here", job_id)
            through_database_outage(
                lambda: handoff.job_finish_in_worker(
                    job_id=job_id, outcome=execution.outcome, horse_status="finished"
                ),
                what=f"end of job {job_id}",
            )
        return execution.outcome
    finally:
        connections.close_all()


class JobExecution:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        # The worker process started the job and records how it ends from ``outcome``.
        self.worker_finishes = job_id in handoff.STARTED_BY_WORKER
        self.outcome: dict[str, Any] | None = None

    def run(self) -> None:
        if self.worker_finishes:
            started = handoff.STARTED_BY_WORKER[self.job_id]
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
            self.end(
                lifecycle.job_fail, code="invalid_arguments", message=server_paths_hidden(str(exc))
            )
            return
        ctx = JobToolContext(job)
        heartbeat = Heartbeat(ctx)
        heartbeat.start()
        try:
            self.execute(tool.run, args, ctx)
        finally:
            heartbeat.finished.set()
            heartbeat.join(timeout=5)
            if ctx.cancelled:
                redis_connection().delete(cancel_key(self.job_id))

    def execute(self, run: Any, args: Any, ctx: JobToolContext) -> None:
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
            self.end(lifecycle.job_fail, code="tool_error", message=tool_error_message(exc))
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

    def end_stopped(self, ctx: JobToolContext) -> None:
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
