from __future__ import annotations

from typing import Any

import pytest

from sessions.models import AgentSession, Event
from tests.jobs.factories import started_job_id

# Not committed, so the jobs stay queued even while workers run.
pytestmark = pytest.mark.django_db


def test_a_session_job_reports_to_the_log_and_its_end_to_the_inbox(
    api_client: Any, user: Any
) -> None:
    session = AgentSession.objects.create(owner=user)
    job_id = started_job_id(api_client, "sleepy", session_id=session.id)

    api_client.delete(f"/api/jobs/{job_id}")

    events = list(Event.objects.filter(session=session, kind="job_event").order_by("seq"))
    assert [(e.payload["event"], e.pending) for e in events] == [
        ("job_queued", False),
        ("job_cancelled", True),
    ]
    payload = events[-1].payload
    assert payload == {
        "event": "job_cancelled",
        "job_id": job_id,
        "tool": "sleepy",
        "status": "cancelled",
        "progress": {"fraction": None, "message": ""},
        "summary": "cancelled: Cancelled before it started.",
        "error": {"code": "cancelled", "message": "Cancelled before it started."},
        "partial_count": 0,
    }


def test_jobs_can_be_listed_by_session(api_client: Any, user: Any) -> None:
    session = AgentSession.objects.create(owner=user)
    in_session = started_job_id(api_client, "sleepy", session_id=session.id)
    started_job_id(api_client, "sleepy")

    items = api_client.get(f"/api/jobs?session_id={session.id}").json()["items"]

    assert [item["job_id"] for item in items] == [in_session]
