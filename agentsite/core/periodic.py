"""The shape of a periodic task: (function, queue, interval in seconds).

Each app lists its own in ``<app>/tasks.py`` as ``PERIODIC``; ``agentsite.cron``
registers them all with the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PeriodicTask = tuple[Callable[..., Any], str, int]
