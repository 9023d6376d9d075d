"""The shape of a periodic pass: (function, interval in seconds).

Each app lists its own in ``<app>/tasks.py`` as ``PERIODIC``; ``agentsite.cron``
gathers them and ``manage.py scheduler`` runs them, in its own process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PeriodicTask = tuple[Callable[[], Any], int]
