"""The periodic tasks the scheduler runs: (function, queue, interval in seconds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PeriodicTask = tuple[Callable[..., Any], str, int]


def periodic_tasks() -> list[PeriodicTask]:
    import django

    django.setup()
    from jobs.tasks import PERIODIC as job_tasks
    from sessions.tasks import PERIODIC as session_tasks

    return [*job_tasks, *session_tasks]
