"""jobs.services: a job is its owner's alone, and starts only in the owner's live sessions."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from agentsite.core.errors import Invalid, NotFound
from jobs import hooks, services
from jobs.models import Job
from sessions.models import AgentSession

pytestmark = pytest.mark.django_db


def start(owner: Any, key: str, **kw: Any) -> Job:
    job, _ = services.job_create(owner=owner, tool="sleepy", args={}, idempotency_key=key, **kw)
    return job


def test_a_job_is_found_by_its_owner_only(user: Any, other_user: Any) -> None:
    job = start(user, "k1")

    assert services.job_get(owner=user, job_id=job.id) == job
    for owner, job_id in [(other_user, job.id), (user, "job_nope"), (user, "not-an-id")]:
        with pytest.raises(NotFound):
            services.job_get(owner=owner, job_id=job_id)


def test_a_job_starts_in_one_of_the_owners_live_sessions(user: Any) -> None:
    session = AgentSession.objects.create(owner=user)

    assert start(user, "k1", session_id=session.id).session_id == session.id


@pytest.mark.parametrize("whose", ["deleted", "someone else's", "unknown"])
def test_a_job_is_refused_in_any_other_session(user: Any, other_user: Any, whose: str) -> None:
    owner = other_user if whose == "someone else's" else user
    session = AgentSession.objects.create(owner=owner)
    if whose == "deleted":
        AgentSession.objects.filter(pk=session.pk).update(deleted_at=timezone.now())
    session_id = "ses_unknown" if whose == "unknown" else session.id

    with pytest.raises(Invalid) as refused:
        start(user, "k1", session_id=session_id)
    assert refused.value.code == "unknown_session"
    assert not Job.objects.exists()


def test_without_sessions_every_session_id_is_unknown(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = AgentSession.objects.create(owner=user)
    monkeypatch.setattr(hooks, "_registered", hooks.Hooks())

    with pytest.raises(Invalid) as refused:
        start(user, "k1", session_id=session.id)
    assert refused.value.code == "unknown_session"
    assert start(user, "k2").session_id is None
