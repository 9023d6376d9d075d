"""The log reads of streams, on threads of their own."""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypedDict, TypeVar, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from agentsite.core.database import DATABASE_AWAY
from agentsite.core.queries import get_or_none
from sessions.models import Event, Run
from sessions.payloads import EventPayload
from sessions.services import run_for, session_for

P = ParamSpec("P")
T = TypeVar("T")


class EventRow(TypedDict):
    """An event as the replay reads it from the log."""

    seq: int
    kind: str
    payload: EventPayload
    run_id: str | None


# --- log access ------------------------------------------------------------------------

# Stream reads run on threads of their own, never behind the thread-sensitive
# executor, a tool or a request. Each thread keeps its database connection
# between reads: opening one (on SQLite: the file, its pragmas, Django's SQL
# functions) cost more than the reads themselves, three of them per follower
# that connects, which made a reconnect storm costly (docs/benchmarks.md,
# "Streams"). The threads are few, so are the connections;
# with a connection pool (the web process on PostgreSQL) there is nothing to
# keep: each read takes a pooled connection and gives it back.
_readers = concurrent.futures.ThreadPoolExecutor(
    settings.AGENTSITE_STREAM_READ_THREADS, thread_name_prefix="stream-read"
)


def log_read(fn: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """``fn`` as a coroutine function that runs on a stream-read thread."""

    @functools.wraps(fn)
    async def read(*args: P.args, **kwargs: P.kwargs) -> T:
        call = functools.partial(_read, fn, *args, **kwargs)
        result: T = await sync_to_async(call, thread_sensitive=False, executor=_readers)()
        return result

    return read


def _read(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        return fn(*args, **kwargs)
    except DATABASE_AWAY:
        connection.close()  # broken by a restart: the next read reconnects
        raise
    finally:
        if _POOLED:
            # A pooled connection goes back after each read (taking one is cheap):
            # kept by a reader thread, it would be one fewer for requests, and a
            # small pool would be left with none.
            connection.close()


_POOLED = "pool" in settings.DATABASES[DEFAULT_DB_ALIAS].get("OPTIONS", {})


# The ownership rules (``sessions.services``), read the same way: not found is NotFound.
session_read = log_read(session_for)
run_read = log_read(run_for)


@log_read
def run_is_finished(run_id: str) -> bool:
    status = get_or_none(Run.objects.filter(pk=run_id).values_list("status", flat=True))
    return status is None or status in Run.TERMINAL


@log_read
def events_after(
    *, session_id: str, after: int, upto: int | None, run_id: str | None, limit: int
) -> list[EventRow]:
    rows = Event.objects.filter(session_id=session_id, seq__gt=after)
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    fields = ("seq", "kind", "payload", "run_id")
    return cast(list[EventRow], list(rows.order_by("seq").values(*fields)[:limit]))
