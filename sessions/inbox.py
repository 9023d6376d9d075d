"""The session inbox: pending events, and the wake-up of the router.

User messages and job events land here. Each is appended to the log as
*pending* and, in the same transaction, the router makes sure a run will
consume it (see ``sessions.runs``): the queued run, or a new one handed to the
turn workers once the transaction commits.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from sessions.events import event_append
from sessions.models import AgentSession, Event, Run
from sessions.runs import run_route_locked, session_lock


def inbox_append(*, session_id: str, kind: str, payload: dict[str, Any]) -> Event:
    """Append a pending event and wake the router; safe from any process."""
    event, _ = inbox_append_routed(session_id=session_id, kind=kind, payload=payload)
    return event


def inbox_append_routed(
    *, session_id: str, kind: str, payload: dict[str, Any]
) -> tuple[Event, Run | None]:
    """``inbox_append``, also returning the run that will consume the event."""
    with transaction.atomic():
        return inbox_append_locked(session=session_lock(session_id), kind=kind, payload=payload)


def inbox_append_locked(
    *, session: AgentSession, kind: str, payload: dict[str, Any]
) -> tuple[Event, Run | None]:
    """``inbox_append_routed`` for a session the current transaction has locked."""
    event = event_append(session_id=session.pk, kind=kind, payload=payload, pending=True)
    return event, run_route_locked(session, pending=True)
