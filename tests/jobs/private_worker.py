"""A tool worker (``jobs.worker.JobWorker``) on a queue of its own.

``python -m tests.jobs.private_worker QUEUE``: the suite's shared workers serve
``tools``, so a test that must know which worker, and which horse, runs its jobs
enqueues them on a queue only this worker serves (``dispatch.rq_enqueue``'s ``queue``).
"""

from __future__ import annotations

import os
import sys

from rq import Queue


def main(queue_name: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    import django_rq

    from jobs.worker import JobWorker

    connection = django_rq.get_connection("tools")
    worker = JobWorker([Queue(queue_name, connection=connection)], connection=connection)
    worker.work(logging_level="INFO")


if __name__ == "__main__":
    main(sys.argv[1])
