"""RQ entry points of the sessions app. Thin: take an id, call the run services."""

from __future__ import annotations

from agentsite.periodic import PeriodicTask

PERIODIC: list[PeriodicTask] = []
