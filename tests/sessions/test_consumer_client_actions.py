"""Client frames reach the services: post a message, stop a job, interrupt the turn."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from jobs.models import Job
from sessions.models import AgentSession, Run
from tests.sessions.test_stream_clients import (
    communicator,
    connect,
    cookie_for,
    frames,
    frames_until,
    make_session,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_message_frame_posts_a_pending_user_message_with_a_run(user: Any) -> None:
    session = await make_session(user)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    await comm.send_to(text_data='{"type": "message", "text": "hello there"}')

    received: list[dict[str, Any]] = []
    while not any(f.get("type") == "message" for f in received) or not any(
        f.get("kind") == "user_message" for f in received
    ):
        received += await frames(comm, 1)
    reply = next(f for f in received if f.get("type") == "message")
    event = next(f for f in received if f.get("kind") == "user_message")
    assert event["payload"] == {"text": "hello there"} and event["seq"] == reply["seq"]
    run = await database_sync_to_async(Run.objects.get)(pk=reply["run_id"])
    assert run.session_id == session.id
    await comm.disconnect()


@database_sync_to_async
def held_run(session: AgentSession) -> Run:
    """A run that stays active until interrupted, whether or not a turn worker takes it."""
    from sessions.llm.scripted import scripted_push
    from sessions.services import message_post

    AgentSession.objects.filter(pk=session.id).update(model="scripted")
    scripted_push(session.id, {"text": "thinking", "gate": "never-opened"})
    return message_post(session=session, text="a long question")[1]


async def test_interrupt_cancels_the_sessions_run(user: Any) -> None:
    session = await make_session(user)
    run = await held_run(session)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    await frames(comm, 1)  # the user message
    await comm.send_to(text_data='{"type": "interrupt"}')
    received = await frames(comm, 1)
    while "type" not in received[-1]:
        received += await frames(comm, 1)
    reply = received[-1]
    assert reply["type"] == "interrupt" and reply["run_id"] == run.id
    assert reply["state"] in {"cancelled", "cancelling"}
    status = await database_sync_to_async(
        lambda: Run.objects.values_list("status", flat=True).get(pk=run.id)
    )()
    assert status in {Run.Status.CANCELLED, Run.Status.RUNNING}
    await comm.disconnect()


async def test_stop_job_cancels_your_queued_job(user: Any) -> None:
    session = await make_session(user, events=1)
    # Handed to RQ as far as the suite's scheduler knows, so no worker picks it up first.
    job = await database_sync_to_async(Job.objects.create)(
        owner=user,
        session=session,
        tool="run_tests",
        args={},
        timeout_s=60,
        enqueued_at=timezone.now(),
    )
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    await frames_until(comm, 1)
    await comm.send_to(text_data=f'{{"type": "stop_job", "job_id": "{job.id}"}}')
    received = await frames(comm, 1)
    while "type" not in received[-1]:
        received += await frames(comm, 1)
    assert received[-1] == {"type": "stop_job", "job_id": job.id, "state": "cancelled"}
    await database_sync_to_async(job.refresh_from_db)()
    assert job.status == Job.Status.CANCELLED
    await comm.disconnect()
