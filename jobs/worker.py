"""The RQ worker class of agentsite (``RQ["WORKER_CLASS"]``).

RQ forks a work horse per job. For a short tool job that fork is most of the
job's cost, so this worker runs its tool jobs one after another in one horse of
its own, forked once and kept warm (``jobs.horse``); it watches that horse as
RQ watches one (heartbeats, the job's RQ timeout, RQ's stop-job command, a
horse that dies) and forks a new one when it dies or retires. A horse's
database connection is its own: tool jobs have the worker record the start
before the hand-over and the end after it, over the worker's own long-lived
connection, so a short job costs the horse no database connection at all.
Every other job runs exactly as under RQ's ``Worker``, forked per job while
this process holds no database connection.

Neither outage ends the worker: Redis steps wait for Redis
(``agentsite.core.workers.RidesOutRedis``, the base of every worker),
and the start and end of a job wait for the database
(``through_database_outage``), so a database restart delays them, never loses them.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Any

from django.db import connections
from rq import Queue, Worker
from rq.exceptions import InvalidJobOperation
from rq.executions import Execution
from rq.job import Job as RqJob
from rq.job import JobStatus
from rq.utils import now as rq_now
from rq.worker import WorkerStatus

from agentsite.compat import rq as rq_internals
from agentsite.core.database import through_database_outage
from agentsite.core.workers import REDIS_DOWN, RidesOutRedis
from jobs import dispatch, handoff
from jobs.horse import Assignment, WarmHorse

log = logging.getLogger(__name__)

RUN_JOB = "jobs.runner.run_job"


class JobWorker(RidesOutRedis, Worker):
    # The warm horse that runs this worker's tool jobs (``jobs.horse``), once forked.
    _warm_horse: WarmHorse | None = None

    def execute_job(self, job: RqJob, queue: Queue) -> None:
        try:
            self._execute_job(job, queue)
        except REDIS_DOWN as exc:
            # The job's end is recorded in the database (``job_finish_in_worker``)
            # whatever RQ could or could not be told; the worker goes on.
            log.warning("Worker %s: Redis went away around job %s (%s)", self.name, job.id, exc)

    def _execute_job(self, job: RqJob, queue: Queue) -> None:
        if job.func_name != RUN_JOB or len(job.args) != 1:
            # Other tasks do not know to leave an inherited connection alone: fork
            # them without one (the next tool job reconnects).
            connections.close_all()
            super().execute_job(job, queue)
            return
        job_id = str(job.args[0])
        handoff.STARTED_BY_WORKER.clear()
        fd, outcome_file = tempfile.mkstemp(prefix=f"agentsite-{job_id}-")
        os.close(fd)
        try:
            execution = self.prepare_execution(job)
            self._run_in_warm_horse(job, queue, execution, outcome_file)
            self.set_state(WorkerStatus.IDLE)
        finally:
            left, outcome = handoff.outcome_take(outcome_file)
            if left == "nothing":
                # The horse failed before the tool ran (Redis went away under RQ's
                # set-up): nothing happened, so the job goes back to the queue.
                through_database_outage(
                    lambda: handoff.job_return_unstarted_in_worker(job_id=job_id),
                    what=f"job {job_id}",
                )
            else:
                status = "finished" if left == "outcome" else self._rq_status(job)
                if left != "outcome" and status == "finished":
                    outcome = self._rq_outcome(job)
                through_database_outage(
                    lambda: handoff.job_finish_in_worker(
                        job_id=job_id, outcome=outcome, horse_status=status
                    ),
                    what=f"end of job {job_id}",
                )

    def _run_in_warm_horse(
        self, job: RqJob, queue: Queue, execution: Execution, outcome_file: str
    ) -> None:
        """RQ's fork and watch of a horse (``execute_job``), the horse kept for the next job."""
        assignment = Assignment(
            job_id=job.id,
            execution_id=execution.id,
            queue_name=queue.name,
            started=handoff.STARTED_BY_WORKER.get(str(job.args[0])),
            outcome_file=outcome_file,
            reader_pid=os.getpid(),
        )
        horse = self._warm_horse_assign(assignment)
        rq_internals.set_horse_pid(self, horse.pid)
        try:
            self._watch(horse, job, execution)
        except BaseException:
            # The worker stops watching (a cold shutdown, an error of its own): the
            # horse must not finish this job unwatched, nor answer it as the next one.
            self._warm_horse = None
            rq_internals.set_horse_pid(self, 0)
            horse.kill()
            raise
        rq_internals.set_horse_pid(self, 0)
        self.executions.pop(execution.id, None)
        if horse.answer is not None and horse.answer.job_id != job.id:
            self.log.error(
                "Worker %s: work horse %s answered for job %s during job %s; killed",
                self.name,
                horse.pid,
                horse.answer.job_id,
                job.id,
            )
            horse.kill()
            horse.answer = None
        if horse.answer is not None:
            if horse.answer.retiring:
                self.log.info(
                    "Worker %s: work horse %s retires: %s",
                    self.name,
                    horse.pid,
                    horse.answer.reason,
                )
                self._warm_horse = None
                horse.reap()
            return
        self._warm_horse = None
        retpid, ret_val, rusage = horse.reap()
        self._horse_lost(job, queue, execution, retpid, ret_val, rusage)

    def _watch(self, horse: WarmHorse, job: RqJob, execution: Execution) -> None:
        """Until the horse answers or is gone: RQ's watch (``monitor_work_horse``)."""
        job.started_at = rq_now()
        while not horse.wait_answer(self.job_monitoring_interval):
            working_time = (rq_now() - job.started_at).total_seconds()
            if job.timeout != -1 and working_time > (job.timeout or 0) + 60:
                # As RQ's watch: something is really wrong (a hung interpreter).
                self.heartbeat(self.job_monitoring_interval + 60)
                horse.kill()
                return
            self.maintain_heartbeats(job, execution)

    def _warm_horse_assign(self, assignment: Assignment) -> WarmHorse:
        horse = self._warm_horse
        if horse is not None:
            try:
                horse.assign(assignment)
                return horse
            except OSError:  # it died while idle (killed from outside): a new one
                horse.reap()
        # The horse lives on, so it must inherit no database connection: an SQLite
        # connection kept across fork() in a long-lived process would leave it on a
        # stale view of the file once the worker lets go of its own. The worker
        # reconnects at its next step; forks are rare (one per horse).
        connections.close_all()
        horse = self._warm_horse = WarmHorse.fork(self)
        self.procline(f"Forked {horse.pid} at {time.time()}")  # type: ignore[no-untyped-call]
        horse.assign(assignment)
        return horse

    def _horse_lost(
        self,
        job: RqJob,
        queue: Queue,
        execution: Execution,
        retpid: int | None,
        ret_val: int | None,
        rusage: Any,
    ) -> None:
        """The horse ended without answering: RQ's handling of a horse that died (its
        ``monitor_work_horse``), so that RQ's registries say what happened."""
        if ret_val == os.EX_OK:
            return
        try:
            job_status = job.get_status()
        except InvalidJobOperation:
            return  # the RQ job completed and expired
        if rq_internals.stopped_on_request(self, job):
            rq_internals.handle_stopped_job(self, job, queue, execution)
        elif job_status not in (JobStatus.FINISHED, JobStatus.FAILED):
            job.ended_at = rq_now()
            signalled = ret_val is not None and os.WIFSIGNALED(ret_val)
            signal_msg = f" (signal {os.WTERMSIG(ret_val)})" if signalled else ""  # type: ignore[arg-type]
            exc_string = (
                f"Work-horse terminated unexpectedly; waitpid returned {ret_val}{signal_msg}; "
            )
            self.log.warning("Worker %s: job %s failed (%s)", self.name, job.id, exc_string)
            self.handle_work_horse_killed(job, retpid, ret_val, rusage)  # type: ignore[no-untyped-call]
            self.handle_job_failure(job, queue=queue, exc_string=exc_string, execution=execution)

    def teardown(self) -> None:
        if self._warm_horse is not None:
            self._warm_horse.close()
            self._warm_horse = None
        super().teardown()

    def prepare_execution(self, job: RqJob) -> Any:
        """RQ's bookkeeping first, then the job's start in the database.

        If Redis goes away in between dequeue and fork, the job was never
        started: it stays ``queued`` and the sweep hands it over again.
        """
        try:
            execution = super().prepare_execution(job)
        except REDIS_DOWN:
            if job.func_name == RUN_JOB and len(job.args) == 1:
                through_database_outage(
                    lambda: dispatch.job_handover_lost(job_id=str(job.args[0])),
                    what=f"job {job.id}",
                )
            raise
        if job.func_name == RUN_JOB and len(job.args) == 1:
            job_id, timeout_s = str(job.args[0]), job.meta.get("timeout_s")
            through_database_outage(
                lambda: handoff.job_start_in_worker(
                    job_id=job_id, worker_name=self.name, timeout_s=timeout_s
                ),
                what=f"start of job {job_id}",
            )
        return execution

    def _rq_status(self, job: RqJob) -> str:
        try:
            return str(job.get_status(refresh=True).value)
        except Exception:  # the RQ job expired or Redis went away
            log.warning("no RQ status for job %s", job.id, exc_info=True)
            return "unknown"

    def _rq_outcome(self, job: RqJob) -> Any:
        try:
            return job.return_value(refresh=True)
        except Exception:
            log.warning("no RQ result for job %s", job.id, exc_info=True)
            return None
