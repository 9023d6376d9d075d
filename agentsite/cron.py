"""The periodic passes ``manage.py scheduler`` runs: deadlines, abandoned jobs and runs,
webhook retries, expiry, retention.
"""

from __future__ import annotations

import django

from agentsite.core.periodic import PeriodicTask


def periodic_tasks() -> list[PeriodicTask]:
    """Every app's periodic passes (``<app>/tasks.py``'s ``PERIODIC``)."""
    django.setup()
    from a2a_api.tasks import PERIODIC as a2a_tasks
    from jobs.tasks import PERIODIC as job_tasks  # after django.setup(): the apps' models
    from sessions.tasks import PERIODIC as session_tasks

    return [*job_tasks, *session_tasks, *a2a_tasks]
