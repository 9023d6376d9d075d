"""Small helpers for the sessions tests: sessions, waiting for runs, reading the log."""

from __future__ import annotations

from typing import Any

from sessions.models import AgentSession, Event, Run
from sessions.services import session_create
from tests.conftest import wait_until


def make_session(owner: Any, *, model: str = "scripted", **extra: Any) -> AgentSession:
    return session_create(owner=owner, model=model, **extra)


def wait_for_run(run_id: str, timeout: float = 30) -> Run:
    """Wait until the run is finished; returns it."""
    return wait_until(
        lambda: Run.objects.filter(pk=run_id, status__in=Run.TERMINAL).first(), timeout=timeout
    )


def wait_for_idle(session: AgentSession, timeout: float = 60) -> None:
    """Wait until the session has no live run and nothing pending."""

    def idle() -> bool:
        live = Run.objects.filter(session=session, status__in=["queued", "running"]).exists()
        pending = Event.objects.filter(session=session, pending=True).exists()
        return not live and not pending

    wait_until(idle, timeout=timeout)


def kinds(session: AgentSession) -> list[str]:
    return list(
        Event.objects.filter(session=session)
        .exclude(kind=Event.Kind.ASSISTANT_DELTA)
        .order_by("seq")
        .values_list("kind", flat=True)
    )


def messages(session: AgentSession, run: Run | None = None) -> list[str]:
    rows = Event.objects.filter(session=session, kind=Event.Kind.ASSISTANT_MESSAGE)
    if run is not None:
        rows = rows.filter(run=run)
    return [e.payload["text"] for e in rows.order_by("seq")]
