"""event_append gives dense, gapless seqs, also with concurrent writer processes; events
appended together (event_append_many) too."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction

from sessions.events import EventDraft, event_append, event_append_many
from sessions.models import AgentSession, Event, Run
from tests.conftest import run_writers

WRITER = textwrap.dedent(
    """
    import sys, django
    django.setup()
    from sessions.events import event_append
    session_id, writer, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(count):
        event_append(session_id=session_id, kind="user_message", payload={"w": writer, "i": i})
    """
)


def test_it_numbers_events_from_one(user: Any) -> None:
    session = AgentSession.objects.create(owner=user)
    first = event_append(
        session_id=session.id, kind="user_message", payload={"text": "hi"}, pending=True
    )
    second = event_append(
        session_id=session.id, kind="assistant_message", payload={"text": "hello"}
    )
    session.refresh_from_db()
    assert (first.seq, second.seq, session.last_seq) == (1, 2, 2)
    assert first.pending and not second.pending


def test_sessions_have_independent_sequences(make_user: object) -> None:
    owner = make_user()  # type: ignore[operator]
    a = AgentSession.objects.create(owner=owner)
    b = AgentSession.objects.create(owner=owner)
    event_append(session_id=a.id, kind="user_message", payload={})
    assert event_append(session_id=b.id, kind="user_message", payload={}).seq == 1


def test_appending_to_a_missing_session_raises(db: None) -> None:
    with pytest.raises(AgentSession.DoesNotExist):
        event_append(session_id="ses_missing", kind="user_message", payload={})


@pytest.mark.django_db(transaction=True)
def test_concurrent_writer_processes_never_leave_gaps_or_duplicates(user: Any) -> None:
    session = AgentSession.objects.create(owner=user)
    writers, per_writer = 6, 40
    run_writers(WRITER, session.id, writers, per_writer)

    seqs = list(Event.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, writers * per_writer + 1))
    session.refresh_from_db()
    assert session.last_seq == writers * per_writer
    # Each writer's own events kept their order.
    for w in range(writers):
        mine = [
            e.payload["i"]
            for e in Event.objects.filter(session=session).order_by("seq")
            if e.payload["w"] == str(w)
        ]
        assert mine == list(range(per_writer))


@pytest.mark.parametrize("pending", [False, True])
def test_the_event_returned_is_the_row_stored(user: Any, pending: bool) -> None:
    session = AgentSession.objects.create(owner=user)
    run = Run.objects.create(session=session, owner=user)
    made = event_append(
        session_id=session.id,
        kind="assistant_delta",
        payload={"text": "héllo", "n": [1, None]},
        pending=pending,
        run_id=run.id,
    )
    stored = Event.objects.get(pk=made.pk)
    assert (made.seq, made.kind, made.payload, made.pending, made.run_id) == (
        stored.seq,
        stored.kind,
        stored.payload,
        stored.pending,
        stored.run_id,
    )
    assert (stored.pending, stored.run_id) == (pending, run.id)
    assert made.created_at == stored.created_at
    assert stored.consumed_by_id is None


def test_a_missing_session_fails_the_callers_whole_transaction(user: Any) -> None:
    kept = AgentSession.objects.create(owner=user)
    with transaction.atomic():
        event_append(session_id=kept.id, kind="user_message", payload={})
        with pytest.raises(AgentSession.DoesNotExist):
            event_append(session_id="ses_missing", kind="user_message", payload={})
    # The caller went on and left its block normally: nothing of it was committed.
    assert not Event.objects.filter(session=kept).exists()


@pytest.mark.django_db(transaction=True)
async def test_events_appended_together_are_numbered_and_published_in_order(user: Any) -> None:
    # A turn worker writes the deltas of the answers due together in one
    # transaction; each session's live listeners get them in seq order.
    a, b = [await database_sync_to_async(AgentSession.objects.create)(owner=user) for _ in range(2)]
    layer = get_channel_layer()
    channels = {}
    for session in (a, b):
        channels[session.id] = await layer.new_channel()
        await layer.group_add(f"{AgentSession.group_prefix()}{session.id}", channels[session.id])
    await asyncio.sleep(0.1)  # the subscriptions are live
    drafts = [
        EventDraft(session.id, "assistant_delta", {"text": f"{session.id}-{i}"})
        for i in range(3)
        for session in (b, a)
    ]

    made = await database_sync_to_async(event_append_many)(drafts=drafts)

    assert [e.payload for e in made if isinstance(e, Event)] == [d.payload for d in drafts]
    for session in (a, b):
        received = [
            await asyncio.wait_for(layer.receive(channels[session.id]), 5) for _ in range(3)
        ]
        assert [(m["seq"], m["payload"]["text"]) for m in received] == [
            (i + 1, f"{session.id}-{i}") for i in range(3)
        ]
    stored = await database_sync_to_async(
        lambda: sorted(Event.objects.values_list("session_id", "seq", "payload"))
    )()
    assert stored == sorted((e.session_id, e.seq, e.payload) for e in made if isinstance(e, Event))
    await layer.flush()


@pytest.mark.django_db(transaction=True)  # as a turn worker calls it: in autocommit
def test_a_draft_whose_session_is_gone_fails_alone(user: Any) -> None:
    kept = AgentSession.objects.create(owner=user)
    drafts = [
        EventDraft(kept.id, "assistant_delta", {"text": "one"}),
        EventDraft("ses_missing", "assistant_delta", {"text": "lost"}),
        EventDraft(kept.id, "assistant_delta", {"text": "two"}),
    ]

    made = event_append_many(drafts=drafts)

    assert isinstance(made[1], AgentSession.DoesNotExist)
    assert [(e.seq, e.payload["text"]) for e in made if isinstance(e, Event)] == [
        (1, "one"),
        (2, "two"),
    ]
    assert list(Event.objects.order_by("seq").values_list("seq", "payload")) == [
        (1, {"text": "one"}),
        (2, {"text": "two"}),
    ]


@pytest.mark.django_db(transaction=True)  # as a turn worker calls it: in autocommit
def test_deltas_due_together_on_sqlite_are_two_statements_whatever_their_number(
    user: Any,
) -> None:
    # A bump and an insert for all, where each event took both of its own.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL writes each event in one statement (tests/agentsite)")
    a, b = (AgentSession.objects.create(owner=user) for _ in range(2))
    drafts = [
        EventDraft(session.id, "assistant_delta", {"text": f"{i}"}, None)
        for i in range(3)
        for session in (a, b)
    ]

    with CaptureQueriesContext(connection) as statements:
        made = event_append_many(drafts=drafts)

    written = [q["sql"] for q in statements if q["sql"].startswith(("UPDATE", "INSERT"))]
    assert len(written) == 2, written
    assert [(e.session_id, e.seq, e.payload["text"]) for e in made if isinstance(e, Event)] == [
        (session.id, i + 1, f"{i}") for i in range(3) for session in (a, b)
    ]
    stored = sorted(Event.objects.values_list("session_id", "seq", "payload", "id"))
    assert stored == sorted(
        (e.session_id, e.seq, e.payload, e.pk) for e in made if isinstance(e, Event)
    )
    assert sorted(AgentSession.objects.values_list("last_seq", flat=True)) == [3, 3]
