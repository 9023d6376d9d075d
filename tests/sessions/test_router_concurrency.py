"""The router under fire: every inbox event is consumed by exactly one run.

Several processes post user messages and job completions to one session at
once while three real turn workers run turns; afterwards every event was taken
by exactly one run, the model saw each exactly once as news, and no two runs
of the session overlapped.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from itertools import pairwise
from typing import Any

import pytest

from sessions.llm.scripted import scripted_requests
from sessions.models import Event, Run
from sessions.worker import TURN_WORKER_ARGS
from tests.conftest import Processes, run_writers, wait_for_workers
from tests.sessions.factories import make_session, wait_for_idle

pytestmark = pytest.mark.django_db(transaction=True)

FIRER = textwrap.dedent(
    """
    import random, sys, time, django
    django.setup()
    from sessions.inbox import inbox_append
    from sessions.models import AgentSession
    from sessions.services import message_post
    session_id, writer, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    session = AgentSession.objects.get(pk=session_id)
    rng = random.Random(writer)
    for i in range(count):
        if i % 2:
            message_post(session=session, text=f"m-{writer}-{i}")
        else:
            inbox_append(session_id=session_id, kind="job_event", payload={
                "event": "job_completed", "job_id": f"job_{writer}x{i}", "tool": "noop",
                "status": "done", "summary": f"s-{writer}-{i}", "error": None})
        time.sleep(rng.random() * 0.02)
    """
)


def news_in(request: dict[str, Any]) -> list[str]:
    """The batch items a model request carried (its last, user, message)."""
    items = []
    for block in request["messages"][-1]["content"]:
        text = block.get("text", "")
        items.append(text.split(" ")[2] if text.startswith("[event]") else text)
    return items


def test_concurrent_messages_and_completions_are_each_consumed_once(
    user: Any, rq_workers: Processes
) -> None:
    extra = [rq_workers.start(f"worker-turns-extra-{i}", *TURN_WORKER_ARGS) for i in range(2)]
    try:
        wait_for_workers("turns", 3)
        session = make_session(user)
        writers, per_writer = 5, 30
        run_writers(FIRER, session.id, writers, per_writer)
        wait_for_idle(session, timeout=120)
    finally:
        for proc in extra:
            rq_workers.stop(proc)

    inbox = Event.objects.filter(session=session, kind__in=["user_message", "job_event"])
    assert inbox.count() == writers * per_writer
    assert not inbox.filter(pending=True).exists()
    assert not inbox.filter(consumed_by__isnull=True).exists()

    runs = list(Run.objects.filter(session=session).order_by("started_at"))
    assert all(run.status == Run.Status.COMPLETED for run in runs)
    for run in runs:
        assert run.batch_size == inbox.filter(consumed_by=run).count() >= 1
    assert sum(run.batch_size for run in runs) == writers * per_writer
    for earlier, later in pairwise(runs):
        assert earlier.finished_at is not None and later.started_at is not None
        assert earlier.finished_at <= later.started_at, "two runs of one session overlapped"

    # The model was told about each event exactly once, as news.
    expected = Counter(
        [f"m-{w}-{i}" for w in range(writers) for i in range(1, per_writer, 2)]
        + [f"job_id=job_{w}x{i}" for w in range(writers) for i in range(0, per_writer, 2)]
    )
    seen = Counter(item for request in scripted_requests(session.id) for item in news_in(request))
    assert seen == expected
    assert len(scripted_requests(session.id)) == len(runs)
