"""The offline model checks on, stops and reads jobs through the real job tools."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from jobs.services import job_create
from sessions.models import Event
from sessions.services import message_post
from tests.conftest import wait_until
from tests.sessions.factories import make_session, messages, wait_for_idle, wait_for_run
from tests.sessions.tools_for_tests import gate_open

pytestmark = pytest.mark.django_db(transaction=True)


def say(session: Any, text: str) -> str:
    _, run = message_post(session=session, text=text)
    return messages(session, wait_for_run(run.id))[-1]


def test_status_and_stop_reach_the_job(user: Any, rq_workers: Any) -> None:
    session = make_session(user, model="offline")
    blockers = [
        job_create(
            owner=user, tool="gated", args={"gate": f"{session.id}-{i}"}, idempotency_key=f"o{i}"
        )[0]
        for i in range(2)
    ]
    try:
        wait_until(lambda: Job.objects.filter(status="running").count() >= 2)
        say(session, "run the tests")
        job = Job.objects.get(session=session)

        assert say(session, "how is it going?") == f"{job.id} (run_tests) is queued."
        assert say(session, "stop") == f"Asked {job.id} to stop: it is cancelled."
        wait_for_idle(session)
        cancelled = Event.objects.get(session=session, payload__event="job_cancelled")
        assert messages(session, cancelled.consumed_by) == [
            f"The run_tests job {job.id} was cancelled."
        ]
    finally:
        for blocker in blockers:
            gate_open(blocker.args["gate"])


def test_questions_about_a_finished_job_read_its_result(user: Any, rq_workers: Any) -> None:
    session = make_session(user, model="offline")
    say(session, "run the tests")
    job = Job.objects.get(session=session)
    wait_until(lambda: Job.objects.get(pk=job.id).is_terminal, timeout=90)
    wait_for_idle(session)
    job.refresh_from_db()
    assert job.result is not None
    answer = say(session, "which tests failed?")
    assert answer.startswith(f"{job.id}: {job.result['summary']}.")
    for failure in job.result["failures"][:5]:
        assert failure["nodeid"] in answer
