"""The session event log: append with a dense seq, then publish live.

The database row is the truth; the channel-layer message that follows the
commit is only a notification, which a client may miss and recover by
replaying from the log.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connections, transaction
from django.db.models import F, Field, Model
from django.utils import timezone

from agentsite.core.database import DATABASE_AWAY
from jobs.live import group_send, group_send_many
from sessions.log_watch import log_moved
from sessions.models import AgentSession, Event
from sessions.payloads import SessionEventMessage


def event_append(
    *,
    session_id: str,
    kind: str,
    payload: Mapping[str, Any],
    pending: bool = False,
    run_id: str | None = None,
) -> Event:
    """Append one event to a session's log under the next seq.

    ``payload`` is the kind's TypedDict in ``sessions.payloads``; the job
    lifecycle and the inbox still hand the job event over as a plain dict, so
    any mapping is taken.

    Bumping ``AgentSession.last_seq`` first takes the row's write lock
    (PostgreSQL) or the database write lock (SQLite, IMMEDIATE transactions),
    so concurrent appenders from any number of processes queue up and each
    gets the next number: no gap, no duplicate. The same statement reads whether
    the session's log is watched (``sessions.log_watch``). On PostgreSQL the bump
    and the insert are one statement (one round trip where a transaction of its
    own took four: a turn's deltas are most of a turn's statements); on SQLite
    they are two, each written out once rather than built by the ORM at every
    append.
    """
    connection = transaction.get_connection()
    event = _event(session_id, kind, payload, run_id, pending=pending)
    # No savepoint inside a caller's transaction: a failure here fails that whole
    # transaction (Django marks it for rollback), which is what every caller wants.
    # On PostgreSQL in autocommit (a turn's delta) the one statement commits alone.
    with _statements(connection):
        watched = _append(connection, event)
        transaction.on_commit(lambda: event_committed(event, watched=watched))
    return event


class EventDraft(NamedTuple):
    """An event to append with others (``event_append_many``)."""

    session_id: str
    kind: str
    payload: Mapping[str, Any]
    run_id: str | None = None


def event_append_many(*, drafts: Sequence[EventDraft]) -> list[Event | Exception]:
    """Append events of any sessions in one transaction, published together once it commits.

    A turn worker writes the deltas of every answer due at the same moment this
    way: one commit and one round trip to Redis for all of them, where each
    took its own. Each session still gets dense seqs in its drafts' order. The
    sessions' rows are locked in the order of their ids, so two such writes
    never wait on each other in a cycle.

    Returns each draft's event, in the drafts' order; a draft that cannot be
    appended (its session deleted meanwhile) gets its exception instead, and the
    others are then appended one by one. A connection lost on the way raises, as
    ``event_append`` does, for the caller's retry (``through_database_outage``).
    """
    events = [_event(d.session_id, d.kind, d.payload, d.run_id) for d in drafts]
    in_order = sorted(events, key=lambda event: event.session_id)  # stable: drafts' order
    try:
        with transaction.atomic():
            connection = transaction.get_connection()
            if len(events) > 1 and _batches(connection):
                appended = list(zip(in_order, _append_batch(connection, in_order), strict=True))
            else:
                appended = [(event, _append(connection, event)) for event in in_order]
            transaction.on_commit(lambda: events_committed(appended))
    except DATABASE_AWAY:
        raise
    except Exception:
        if len(drafts) == 1:
            raise
        return [_append_alone(d) for d in drafts]
    return list(events)


def _event(
    session_id: str,
    kind: str,
    payload: Mapping[str, Any],
    run_id: str | None,
    *,
    pending: bool = False,
) -> Event:
    """A new, unsaved event: built from its fields in their order, which Django does in
    half the time it takes from keywords (a turn builds one for every delta)."""
    given = {
        "session_id": session_id,
        "kind": kind,
        "payload": payload,
        "pending": pending,
        "run_id": run_id,
    }
    # Through a plain callable: django-stubs' plugin, depending on its cache, reads a
    # starred argument as the first field alone.
    build: Callable[..., Event] = Event
    return build(*[given.get(name) for name in _attnames(Event)])


@functools.cache
def _attnames(model: type[Model]) -> tuple[str, ...]:
    return tuple(field.attname for field in model._meta.concrete_fields)


def _append_alone(draft: EventDraft) -> Event | Exception:
    try:
        return event_append(
            session_id=draft.session_id, kind=draft.kind, payload=draft.payload, run_id=draft.run_id
        )
    except DATABASE_AWAY:
        raise
    except Exception as exc:
        return exc


def _statements(connection: Any) -> AbstractContextManager[Any]:
    """Around an append's statements: none on PostgreSQL (one statement), a transaction
    (or the caller's) for SQLite's two."""
    if connection.vendor == "postgresql":
        return contextlib.nullcontext()
    return transaction.atomic(savepoint=False)


def _append(connection: Any, event: Event) -> bool:
    """Save ``event`` under its session's next seq; whether the session is watched.

    On PostgreSQL one statement (``_append_one_statement``); elsewhere the bump, then
    the insert, which the caller keeps in one transaction.
    """
    if connection.vendor == "postgresql":
        return _append_one_statement(connection, event)
    seq, watched = _seq_next(event.session_id)
    event.seq = seq
    if connection.features.can_return_columns_from_insert:
        _insert(connection, event)
    else:
        event.save(force_insert=True)
    return watched


_INSERT_FIELDS = ("session", "kind", "payload", "pending", "run", "created_at")


def _batches(connection: Any) -> bool:
    """Whether several events are appended in two statements for all (``_append_batch``):
    SQLite 3.35+, whose UPDATE and INSERT return rows. PostgreSQL appends each event in
    one statement already (``_append_one_statement``)."""
    return connection.vendor == "sqlite" and bool(
        connection.features.can_return_columns_from_insert
    )


def _append_batch(connection: Any, events: Sequence[Event]) -> list[bool]:
    """Save ``events`` (in their sessions' order) under their sessions' next seqs in two
    statements, where ``_append`` takes two each; whether each one's session is watched.

    One UPDATE bumps every session's ``last_seq`` by its count of events and returns the
    new values; the events of a session take the numbers up to it, in their order. One
    INSERT then writes them all. The caller's transaction holds SQLite's write lock over
    both, so no other appender comes between.
    """
    counts: dict[str, int] = {}
    for event in events:
        counts[event.session_id] = counts.get(event.session_id, 0) + 1
    now = timezone.now()
    created = _fields(Event)["created_at"].get_db_prep_save(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            _bump_many_sql(connection.alias, len(counts)),
            [
                *(value for item in counts.items() for value in item),
                created,
                *counts,
            ],
        )
        bumped = {row[0]: (int(row[1]), bool(row[2])) for row in cursor.fetchall()}
        missing = counts.keys() - bumped.keys()
        if missing:
            raise AgentSession.DoesNotExist(f"session {min(missing)} does not exist")
        next_seq = {session_id: bumped[session_id][0] - n + 1 for session_id, n in counts.items()}
        for event in events:
            event.seq = next_seq[event.session_id]
            next_seq[event.session_id] += 1
        cursor.execute(
            _insert_many_sql(connection.alias, len(events)),
            [
                value
                for event in events
                for value in (
                    *_insert_values(connection, event, now=now, created=created),
                    event.seq,
                )
            ],
        )
        ids = {(row[1], int(row[2])): row[0] for row in cursor.fetchall()}
    for event in events:
        event.pk = ids[event.session_id, event.seq]
        event._state.adding, event._state.db = False, connection.alias
    return [bumped[event.session_id][1] for event in events]


@functools.cache
def _fields(model: type[Model]) -> dict[str, Field[Any, Any]]:
    return {field.name: field for field in model._meta.concrete_fields}


@functools.cache
def _columns(model: type[Model]) -> dict[str, str]:
    return {name: str(field.column) for name, field in _fields(model).items()}


@functools.cache
def _bump_sql(alias: str) -> str:
    """The bump of a session's ``last_seq`` (and ``updated_at``, the first parameter),
    returning it and whether the session is watched."""
    quote = connections[alias].ops.quote_name
    session = _columns(AgentSession)
    last_seq, watched = quote(session["last_seq"]), quote(session["watched"])
    return (
        f"UPDATE {quote(AgentSession._meta.db_table)} SET {last_seq} = {last_seq} + 1,"
        f" {quote(session['updated_at'])} = %s"
        f" WHERE {quote(session['id'])} = %s RETURNING {last_seq}, {watched}"
    )


@functools.cache
def _append_sql(alias: str) -> str:
    """The bump and the insert under the number it returns, in one statement (PostgreSQL)."""
    quote = connections[alias].ops.quote_name
    session, event = _columns(AgentSession), _columns(Event)
    last_seq, seq = quote(session["last_seq"]), quote(event["seq"])
    columns = [quote(event[name]) for name in _INSERT_FIELDS]
    return (
        f"WITH bumped AS ({_bump_sql(alias)}),"
        f" inserted AS (INSERT INTO {quote(Event._meta.db_table)} ({', '.join(columns)}, {seq})"
        f" SELECT {', '.join(['%s'] * len(columns))}, {last_seq} FROM bumped"
        f" RETURNING {quote(event['id'])}, {seq})"
        f" SELECT inserted.*, bumped.{quote(session['watched'])} FROM inserted, bumped"
    )


@functools.lru_cache(maxsize=256)
def _bump_many_sql(alias: str, sessions: int) -> str:
    """The bump of ``sessions`` sessions' ``last_seq`` by a count each (the parameters: id,
    count for each; ``updated_at``; the ids), returning id, ``last_seq`` and ``watched``."""
    quote = connections[alias].ops.quote_name
    session = _columns(AgentSession)
    id_, last_seq = quote(session["id"]), quote(session["last_seq"])
    by = " ".join(["WHEN %s THEN %s"] * sessions)
    return (
        f"UPDATE {quote(AgentSession._meta.db_table)}"
        f" SET {last_seq} = {last_seq} + CASE {id_} {by} END,"
        f" {quote(session['updated_at'])} = %s"
        f" WHERE {id_} IN ({', '.join(['%s'] * sessions)})"
        f" RETURNING {id_}, {last_seq}, {quote(session['watched'])}"
    )


@functools.lru_cache(maxsize=256)
def _insert_many_sql(alias: str, rows: int) -> str:
    """The insert of ``rows`` events whose seqs are known, returning each one's id, session
    and seq (the order of the rows a RETURNING gives back is not defined; SQLite 3.35+):
    written once, where the ORM would build and compile it at every delta."""
    quote = connections[alias].ops.quote_name
    event = _columns(Event)
    columns = [quote(event[name]) for name in (*_INSERT_FIELDS, "seq")]
    row = f"({', '.join(['%s'] * len(columns))})"
    return (
        f"INSERT INTO {quote(Event._meta.db_table)} ({', '.join(columns)})"
        f" VALUES {', '.join([row] * rows)}"
        f" RETURNING {quote(event['id'])}, {quote(event['session'])}, {quote(event['seq'])}"
    )


def _insert_values(
    connection: Any, event: Event, *, now: datetime | None = None, created: Any = None
) -> list[Any]:
    """``event``'s values for ``_INSERT_FIELDS``, stamped ``now`` (by default the time of
    the call; ``created``: that time as the database takes it, when the caller has it).

    The session, the kind, the run and the flag are a string, a string, a string or
    None and a bool, which every backend takes as they are; the payload and the time
    go through their fields.
    """
    event.created_at = timezone.now() if now is None else now
    fields = _fields(Event)
    if created is None:
        created = fields["created_at"].get_db_prep_save(event.created_at, connection)
    payload = fields["payload"].get_db_prep_save(event.payload, connection)
    return [event.session_id, event.kind, payload, event.pending, event.run_id, created]


def _insert(connection: Any, event: Event) -> None:
    """Insert ``event`` (its seq set) in one statement; its id is read back."""
    with connection.cursor() as cursor:
        cursor.execute(
            _insert_many_sql(connection.alias, 1), [*_insert_values(connection, event), event.seq]
        )
        event.pk = cursor.fetchone()[0]
    event._state.adding, event._state.db = False, connection.alias


def _append_one_statement(connection: Any, event: Event) -> bool:
    """PostgreSQL: ``event`` saved under the session's next seq in one round trip; whether
    the session is watched.

    The UPDATE takes the session row's lock as ``_seq_next`` does and holds it to
    the end of the statement's transaction (the caller's, or the statement's own
    in autocommit): concurrent appenders still queue and each gets the next number.
    """
    sql = _append_sql(connection.alias)
    values = _insert_values(connection, event)
    with connection.cursor() as cursor:
        cursor.execute(sql, [event.created_at, event.session_id, *values])
        row = cursor.fetchone()
    if row is None:
        if connection.in_atomic_block:
            transaction.set_rollback(True)  # as a failure inside ``atomic`` marks it
        raise AgentSession.DoesNotExist(f"session {event.session_id} does not exist")
    event.pk, event.seq = row[0], int(row[1])
    event._state.adding, event._state.db = False, connection.alias
    return bool(row[2])


def event_committed(event: Event, *, watched: bool) -> None:
    event_publish(event)
    if watched:
        log_moved(event.session_id, event.kind, event.payload)


def events_committed(appended: Sequence[tuple[Event, bool]]) -> None:
    """``event_committed`` for several events: published in one round trip, in order."""
    group_send_many(
        [(_group(event.session_id), dict(event_message(event))) for event, _ in appended]
    )
    for event, watched in appended:
        if watched:
            log_moved(event.session_id, event.kind, event.payload)


def _seq_next(session_id: str) -> tuple[int, bool]:
    """Bump the session's ``last_seq``; return it and whether the session is watched: one
    statement where the database can return what it updated (PostgreSQL, SQLite 3.35+),
    two elsewhere."""
    connection = transaction.get_connection()
    if connection.features.can_return_columns_from_insert:
        with connection.cursor() as cursor:
            cursor.execute(
                _bump_sql(connection.alias),
                [connection.ops.adapt_datetimefield_value(timezone.now()), session_id],
            )
            row = cursor.fetchone()
        if row is None:
            raise AgentSession.DoesNotExist(f"session {session_id} does not exist")
        return int(row[0]), bool(row[1])
    bumped = AgentSession.objects.filter(pk=session_id).update(
        last_seq=F("last_seq") + 1, updated_at=timezone.now()
    )
    if bumped != 1:
        raise AgentSession.DoesNotExist(f"session {session_id} does not exist")
    seq, is_watched = (
        AgentSession.objects.filter(pk=session_id).values_list("last_seq", "watched").get()
    )
    return int(seq), bool(is_watched)


def event_message(event: Event) -> SessionEventMessage:
    """The channel-layer message for an event (handled by ``session_event``)."""
    return {
        "type": "session.event",
        "seq": event.seq,
        "kind": event.kind,
        "payload": event.payload,
        "run_id": event.run_id,
        "created_at": event.created_at.isoformat(),
    }


def event_publish(event: Event) -> None:
    """Notify live listeners of a committed event; a failure only costs liveness.

    Called from the committing thread: a request thread, a turn runtime's
    database thread, a work horse. ``group_send`` publishes on this process's
    own Redis client there and then, rather than hopping to an event loop (in
    a turn worker or daphne, the busy one serving every other conversation)
    and blocking the database thread until that loop gets to it.
    """
    group_send(_group(event.session_id), dict(event_message(event)))


def _group(session_id: str) -> str:
    return f"{AgentSession.group_prefix()}{session_id}"
