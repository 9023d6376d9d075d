"""Events appended while a client replays reach it exactly once, in order.

Another process appends to the log as fast as it can while clients connect at
staggered moments from different tokens; each client must see a dense run of
seqs from its token to the end: no gap at the replay→live boundary, no
duplicate.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from channels.db import database_sync_to_async

from sessions.models import AgentSession, Event
from tests.conftest import BASE_DIR, subprocess_env
from tests.sessions.test_stream_clients import (
    append,
    communicator,
    connect,
    cookie_for,
    frames,
    frames_until,
    make_session,
    token_at,
)

pytestmark = pytest.mark.django_db(transaction=True)

WRITER = textwrap.dedent(
    """
    import sys, time, django
    django.setup()
    from sessions.events import event_append
    session_id, count = sys.argv[1], int(sys.argv[2])
    for i in range(count):
        event_append(session_id=session_id, kind="assistant_delta", payload={"text": f"<{i}>"})
        if i % 10 == 0:
            time.sleep(0.005)
    """
)
TOTAL = 400


async def follow_from(session: AgentSession, cookie: tuple[bytes, bytes], after: int) -> list[int]:
    comm = communicator(
        session.id, headers=[cookie], after=token_at(session, after) if after else ""
    )
    await connect(comm)
    received = await frames_until(comm, TOTAL, timeout=90)
    await comm.disconnect()
    return [f["seq"] for f in received]


async def test_clients_joining_during_appends_see_every_event_once(user: Any) -> None:
    session = await make_session(user, events=20)
    cookie = await cookie_for(user)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, session.id, str(TOTAL - 20)],
        cwd=BASE_DIR,
        env=subprocess_env(),
    )
    clients = []
    try:
        for i in range(8):
            last = await database_sync_to_async(
                lambda: AgentSession.objects.values_list("last_seq", flat=True).get(pk=session.id)
            )()
            # Some from the start, some from the live edge, some from the middle.
            after = [0, last, last // 2, max(last - 1, 0)][i % 4]
            clients.append((after, asyncio.create_task(follow_from(session, cookie, after))))
            await asyncio.sleep(0.05 + 0.03 * i)
        results = [(after, await task) for after, task in clients]
    finally:
        assert await asyncio.to_thread(writer.wait, 120) == 0

    for after, seqs in results:
        assert seqs == list(range(after + 1, TOTAL + 1)), f"client after {after}"


@database_sync_to_async
def append_unpublished(session: AgentSession) -> int:
    """A logged event whose live notification never went out (as if Redis dropped it)."""
    from django.db import transaction
    from django.db.models import F

    with transaction.atomic():
        AgentSession.objects.filter(pk=session.pk).update(last_seq=F("last_seq") + 1)
        seq = AgentSession.objects.values_list("last_seq", flat=True).get(pk=session.pk)
        Event.objects.create(
            session=session, seq=seq, kind="assistant_delta", payload={"text": "lost"}
        )
    return seq


async def test_a_notification_lost_by_the_live_channel_is_read_back_from_the_log(user: Any) -> None:
    session = await make_session(user, events=1)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    assert [f["seq"] for f in await frames(comm, 1)] == [1]

    lost = await append_unpublished(session)
    await append(session_id=session.id, kind="assistant_delta", payload={"text": "next"})
    received = await frames(comm, 2)
    assert [f["seq"] for f in received] == [lost, lost + 1]
    assert received[0]["payload"] == {"text": "lost"}
    await comm.disconnect()


async def test_a_ping_reads_back_a_lost_notification_at_the_end_of_the_log(user: Any) -> None:
    session = await make_session(user, events=1)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    await frames(comm, 1)
    lost = await append_unpublished(session)

    await comm.send_to(text_data='{"type": "ping"}')
    received = await frames(comm, 2)
    assert {"type": "pong"} in received
    assert [f["seq"] for f in received if "seq" in f] == [lost]
    await comm.disconnect()
