"""RQ entry points of the jobs app. Thin: take an id, call the lifecycle or a service."""

from __future__ import annotations

from agentsite.periodic import PeriodicTask
from jobs import services


def expire_idempotency_keys() -> int:
    return services.idempotency_keys_expire()


PERIODIC: list[PeriodicTask] = [
    (expire_idempotency_keys, "default", 300),
]
