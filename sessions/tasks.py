"""RQ entry points of the sessions app. Thin: take an id, call the run services."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agentsite.core.periodic import PeriodicTask
from sessions.approvals import EXPIRY_SWEEP_S, approvals_expire
from sessions.retention import sessions_purge
from sessions.runs import runs_reap
from sessions.runtime import run_execute


def run_turn(run_id: str) -> str:
    """Run one model turn (queue ``turns``; the RQ job id is the run id; ``runs.RUN_TURN``)."""
    return run_execute(run_id=run_id)


def reap_runs() -> dict[str, Any]:
    """Fail runs whose worker was lost; re-enqueue queued runs RQ forgot."""
    return runs_reap()


def expire_approvals() -> dict[str, int]:
    """Requests for approval and questions past their time end ``expired``."""
    return {"approvals_expired": approvals_expire()}


def purge_sessions() -> dict[str, int]:
    """The retention pass: sessions deleted over ``AGENTSITE_SESSION_RETENTION_DAYS`` ago."""
    return {"sessions_deleted": sessions_purge()}


PERIODIC: list[PeriodicTask] = [
    # Every few seconds: with the default staleness a killed worker's runs end within ~20 s.
    (reap_runs, 5),
    (expire_approvals, EXPIRY_SWEEP_S),
    (purge_sessions, settings.AGENTSITE_RETENTION_SWEEP_S),
]
