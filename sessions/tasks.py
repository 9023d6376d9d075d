"""RQ entry points of the sessions app. Thin: take an id, call the run services."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connections

from agentsite.core.periodic import PeriodicTask
from jobs.handoff import connections_detach_inherited
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
    connections_detach_inherited()
    try:
        return {"approvals_expired": approvals_expire()}
    finally:
        connections.close_all()


def purge_sessions() -> dict[str, int]:
    """The retention pass: sessions deleted over ``AGENTSITE_SESSION_RETENTION_DAYS`` ago."""
    connections_detach_inherited()
    try:
        return {"sessions_deleted": sessions_purge()}
    finally:
        connections.close_all()


# On ``turns``, so a lost turn is reaped by the turn workers (never behind tool jobs),
# every few seconds: with the default staleness a killed worker's runs end within ~20 s.
PERIODIC: list[PeriodicTask] = [
    (reap_runs, "turns", 5),
    # On ``default``: an expiry's consequences are a job cancelled and an inbox event.
    (expire_approvals, "default", EXPIRY_SWEEP_S),
    # On ``default`` like the jobs' retention pass (jobs.tasks.purge_jobs).
    (purge_sessions, "default", settings.AGENTSITE_RETENTION_SWEEP_S),
]
