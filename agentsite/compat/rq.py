"""RQ's worker and cron scheduler internals that agentsite's workers build on.

Verified against rq 3.0.0 and django-rq 4.2.0. Checked by ``tests/compat/test_rq.py``.

RQ documents how to subclass ``Worker`` but not the methods a subclass may
override, nor their signatures. ``agentsite/core/workers.py`` (``RidesOutRedis``),
``jobs/worker.py`` (``JobWorker``), ``sessions/worker.py`` (``TurnWorker``), ``jobs/horse.py`` (the
warm horse, RQ's ``main_work_horse`` kept alive) and
``agentsite/management/commands/scheduler.py`` (a loop of its own on RQ's cron
scheduler: its registration and heartbeat) override or call the methods below:
``OVERRIDDEN`` and ``CALLED`` list each with the parameters it was written
against, and the test fails when RQ changes one, or when a worker overrides an
RQ method this table does not list.
The private attributes they touch are read and written only through the
functions of this module.
"""

from __future__ import annotations

from typing import Any

# RQ methods agentsite's worker classes (and the scheduler) override: name -> parameters.
OVERRIDDEN: dict[str, dict[str, list[str]]] = {
    "rq.worker.Worker": {
        "heartbeat": ["self", "timeout", "pipeline"],
        "check_for_suspension": ["self", "burst"],
        "run_maintenance_tasks": ["self"],
        "dequeue_job_and_maintain_ttl": ["self", "timeout", "max_idle_time"],
        "maintain_heartbeats": ["self", "job", "execution"],
        "unsubscribe": ["self"],
        "teardown": ["self"],
        "execute_job": ["self", "job", "queue"],
        "prepare_execution": ["self", "job"],
        "request_force_stop": ["self", "signum", "frame"],
        "_shutdown": ["self"],
        "work": [
            "self",
            "burst",
            "logging_level",
            "date_format",
            "log_format",
            "max_jobs",
            "max_idle_time",
            "with_scheduler",
            "dequeue_strategy",
        ],
    },
    "django_rq.cron.DjangoCronScheduler": {
        "start": ["self"],
    },
}

# RQ methods they call that RQ's documentation does not offer to subclasses.
CALLED: dict[str, dict[str, list[str]]] = {
    "rq.worker.Worker": {
        "register_birth": ["self"],
        "procline": ["self", "message"],
        "set_state": ["self", "state", "pipeline"],
        "set_shutdown_requested_date": ["self"],
        "setup_work_horse_signals": ["self"],
        "prepare_job_execution": ["self", "job", "remove_from_intermediate_queue"],
        "perform_job": ["self", "job", "queue", "execution"],
        "handle_work_horse_killed": ["self", "job", "retpid", "ret_val", "rusage"],
        "handle_job_failure": [
            "self",
            "job",
            "queue",
            "started_job_registry",
            "exc_string",
            "execution",
        ],
        "_handle_stopped_job": ["self", "job", "queue", "execution"],
        "_finalize_success": ["self", "job", "queue", "execution", "return_value"],
        "_finalize_failure": ["self", "job", "queue", "execution", "exc_info"],
        # What the warm horse (jobs/horse.py) and its watch (jobs/worker.py) mirror.
        "main_work_horse": ["self", "job", "queue"],
        "monitor_work_horse": ["self", "job", "queue", "execution"],
    },
    "django_rq.cron.DjangoCronScheduler": {
        "_install_signal_handlers": ["self"],
        "register_birth": ["self"],
        "register_death": ["self", "pipeline"],
        "heartbeat": ["self"],
    },
}

# Attributes of a worker read or set here (besides the methods above).
WORKER_ATTRIBUTES = (
    "_stop_requested", "_horse_pid", "_stopped_job_id", "_is_horse", "executions",
    "execution", "pubsub", "pubsub_thread", "pubsub_channel_name", "redis_workers_keys",
    "job_monitoring_interval",
)  # fmt: skip


def stop_requested(worker: Any) -> bool:
    """Whether the worker was asked to stop (a warm shutdown)."""
    return bool(worker._stop_requested)


def request_stop(worker: Any) -> None:
    """Ask the worker's loop to stop after the current step, as RQ's signal handler does."""
    worker._stop_requested = True


def set_horse_pid(worker: Any, pid: int) -> None:
    """The work horse RQ's stop command and forced stop kill (0: none)."""
    worker._horse_pid = pid


def stopped_on_request(worker: Any, job: Any) -> bool:
    """Whether ``job``'s horse was killed by RQ's stop-job command."""
    return bool(worker._stopped_job_id == job.id)


def handle_stopped_job(worker: Any, job: Any, queue: Any, execution: Any) -> None:
    """RQ's bookkeeping of a job stopped on request."""
    worker._handle_stopped_job(job, queue, execution)


def finalize_success(worker: Any, job: Any, queue: Any, execution: Any, value: Any) -> None:
    """RQ's bookkeeping of a job that returned ``value`` (registries, result, callbacks)."""
    worker._finalize_success(job, queue, execution, value)


def finalize_failure(worker: Any, job: Any, queue: Any, execution: Any, exc_info: Any) -> None:
    """RQ's bookkeeping of a job that raised."""
    worker._finalize_failure(job, queue, execution, exc_info)


def become_horse(worker: Any) -> None:
    """Mark a forked copy of the worker as its work horse (``is_horse``)."""
    worker._is_horse = True


def attach_job(execution: Any, job: Any) -> None:
    """Give a fetched ``Execution`` its job, as RQ's worker does before performing it."""
    execution._job = job


def install_signal_handlers(scheduler: Any) -> None:
    """RQ's cron scheduler's SIGINT/SIGTERM handling, for a loop of agentsite's own."""
    scheduler._install_signal_handlers()
