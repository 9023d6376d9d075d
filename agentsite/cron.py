"""RQ cron configuration, loaded by ``manage.py scheduler`` (or ``rqcron agentsite.cron``).

Periodic housekeeping that must not depend on any one worker being alive:
deadlines, abandoned jobs and runs, webhook retries, expiry.
"""

from __future__ import annotations

import django
from rq import cron

from agentsite.core.periodic import IN_PROCESS, PeriodicTask


def periodic_tasks() -> list[PeriodicTask]:
    """Every app's periodic tasks (``<app>/tasks.py``'s ``PERIODIC``)."""
    django.setup()
    from a2a_api.tasks import PERIODIC as a2a_tasks
    from jobs.tasks import PERIODIC as job_tasks  # after django.setup(): the apps' models
    from sessions.tasks import PERIODIC as session_tasks

    return [*job_tasks, *session_tasks, *a2a_tasks]


for func, queue_name, interval in periodic_tasks():
    cron.register(
        func,
        queue_name,
        interval=interval,
        job_timeout=60,
        result_ttl=60,
        meta={IN_PROCESS: True},
    )
