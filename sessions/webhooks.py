"""Where a session's events go outside agentsite: signed webhooks.

A session's events are posted to the session's own ``callback_url``, else to
its owner's address (``PUT /api/webhooks``), else nowhere. Recording, signing
and retrying the delivery are ``jobs.webhooks``' (``webhook_send``), as for a
job's callback; only which address is this module's.
"""

from __future__ import annotations

from typing import Any

from jobs.webhooks import webhook_send, webhook_url_of
from sessions.models import AgentSession


def session_webhook_url(*, owner_id: Any, callback_url: str) -> str:
    """Where a session with ``callback_url`` posts its events ("" for nowhere)."""
    return callback_url or webhook_url_of(user_id=owner_id)


def session_webhook_send(*, session_id: str, event_type: str, data: dict[str, Any]) -> None:
    """Post ``event_type`` about the session to where its events go, once the caller commits.

    Call it inside the transaction that writes what the event tells: the delivery
    row commits with it or not at all, and is handed to the queue only after the
    commit (committed before published). The body is ``{"type": event_type,
    "timestamp", "data"}``, ``data`` with the session's id as ``session_id``;
    signed with the owner's secret, retried as a job's callback is. Nothing is
    sent when neither the session nor its owner names an address, nor for a
    session that is deleted or does not exist.
    """
    row = (
        AgentSession.objects.filter(pk=session_id, deleted_at__isnull=True)
        .values_list("owner_id", "callback_url")
        .first()
    )
    if row is None:
        return
    owner_id, callback_url = row
    url = session_webhook_url(owner_id=owner_id, callback_url=callback_url)
    if url:
        webhook_send(
            owner_id=owner_id,
            url=url,
            event_type=event_type,
            data={**data, "session_id": session_id},
        )
