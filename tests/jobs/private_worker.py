"""A tool worker (``jobs.worker.JobWorker``) on a queue of its own.

``python -m tests.jobs.private_worker QUEUE``: the suite's shared workers serve
``tools``, so a test that must know which worker, and which horse, runs its jobs
enqueues them on a queue only this worker serves (``enqueue_run_job``).
"""

from __future__ import annotations

import os
import sys


def main(queue_name: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    import django_rq
    from rq import Queue

    from jobs.worker import JobWorker

    connection = django_rq.get_connection("tools")
    worker = JobWorker([Queue(queue_name, connection=connection)], connection=connection)
    worker.work(logging_level="INFO")


def enqueue_run_job(queue_name: str, job_id: str, timeout_s: float) -> None:
    """Hand job ``job_id`` to the worker of ``queue_name``, as ``dispatch.rq_enqueue`` does."""
    import django_rq
    from django.conf import settings
    from rq import Queue

    queue = Queue(queue_name, connection=django_rq.get_connection("tools"))
    queue.enqueue(
        "jobs.runner.run_job",
        job_id,
        job_id=job_id,
        job_timeout=int(timeout_s + 2 * settings.AGENTSITE_JOB_STOP_GRACE_S + 60),
        result_ttl=300,
        meta={"timeout_s": timeout_s},
    )


if __name__ == "__main__":
    main(sys.argv[1])
