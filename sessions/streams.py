"""Resumable session streams: replay from the log, then tail the live channel.

Both transports — the websocket consumer (``sessions.consumers``) and the
server-sent-event views (``sessions.sse``) — follow a session the same way:

1. join the session's channel-layer group, then wait until a marker sent to
   that group comes back, which proves the subscription is live in Redis;
2. replay every logged event after the client's position;
3. forward live notifications, dropping seqs already delivered and reading any
   seq skipped by the live channel back from the log;
4. end once the credential the follower was opened with no longer holds
   (``CredentialWatch``: prompted by its user's group, re-checked when idle).

Because every event is committed before it is published, anything the replay
did not see is published after the marker and so reaches the live queue: the
client gets each event exactly once and in order, however the two race.

This is the core both edges share: it knows no HTTP.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ParamSpec, TypedDict, TypeVar, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from agentsite.core import fanout
from agentsite.core.database import DATABASE_AWAY
from agentsite.core.queries import get_or_none
from agentsite.credentials import (
    Credential,
    CredentialRevoked,
    CredentialsChangedMessage,
    credential_holds,
    credentials_group,
)
from sessions.models import Event, Run
from sessions.payloads import (
    EventPayload,
    LiveMessage,
    SessionEventMessage,
    StreamCheckMessage,
)
from sessions.services import run_for, session_for
from sessions.tokens import run_token, session_token

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

REPLAY_PAGE = 200
# Live notifications a follower may hold before it counts as too slow; it is
# then cut off and resumes from its last token instead of growing in memory.
LIVE_QUEUE_MAX = 1000
BARRIER_TIMEOUT_S = 2.0


class Frame(TypedDict):
    """What a follower is sent for one event: the websocket's frame, an SSE event's data."""

    seq: int
    kind: str
    payload: EventPayload
    token: str


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
# that connects, which made a reconnect storm of 1,000 followers take most of a
# minute of CPU (bench/stream.py). The threads are few, so are the connections;
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


# --- following a log ---------------------------------------------------------------------


# Followers of one session in one process all need the same token for the same
# event: sign it once, not once per connection.
@functools.lru_cache(maxsize=4096)
def frame_token(kind: str, bound_id: str, owner_id: int, seq: int) -> str:
    if kind == "s":
        return session_token(session_id=bound_id, owner_id=owner_id, seq=seq)
    return run_token(run_id=bound_id, owner_id=owner_id, seq=seq)


# Frames as JSON text, by token (one per event and follower kind): every local
# follower of a session is sent the same text, encoded once.
_frame_texts: dict[str, str] = {}
FRAME_TEXTS_MAX = 4096


def frame_json(frame: Frame) -> str:
    """``frame`` as the compact JSON a websocket frame or an SSE ``data:`` line carries."""
    text = _frame_texts.get(frame["token"])
    if text is None:
        text = json.dumps(frame, separators=(",", ":"))
        if len(_frame_texts) >= FRAME_TEXTS_MAX:
            del _frame_texts[next(iter(_frame_texts))]
        _frame_texts[frame["token"]] = text
    return text


class LogTail:
    """A client's position in a session's log (optionally one run's share of it).

    ``cursor`` is the highest session seq the client has been brought past;
    frames come out for each event exactly once, in seq order.
    """

    def __init__(
        self, *, session_id: str, owner_id: int, after: int, run_id: str | None = None
    ) -> None:
        self.session_id = session_id
        self.owner_id = owner_id
        self.cursor = after
        self.run_id = run_id

    def frame(self, event: EventRow | SessionEventMessage) -> Frame:
        seq = int(event["seq"])
        if self.run_id is None:
            token = frame_token("s", self.session_id, self.owner_id, seq)
        else:
            token = frame_token("r", self.run_id, self.owner_id, seq)
        return {"seq": seq, "kind": event["kind"], "payload": event["payload"], "token": token}

    async def replay(self, upto: int | None = None) -> AsyncIterator[Frame]:
        """Frames for the logged events after the cursor (up to ``upto``), page by page."""
        while True:
            rows = await events_after(
                session_id=self.session_id,
                after=self.cursor,
                upto=upto,
                run_id=self.run_id,
                limit=REPLAY_PAGE,
            )
            for row in rows:
                self.cursor = row["seq"]
                yield self.frame(row)
            if len(rows) < REPLAY_PAGE:
                if upto is not None:
                    self.cursor = max(self.cursor, upto)
                return

    async def admit(self, message: SessionEventMessage) -> AsyncIterator[Frame]:
        """Frames for one live notification: none if already delivered, the gap first if any."""
        seq = int(message["seq"])
        if seq <= self.cursor:
            return
        if seq > self.cursor + 1:
            async for frame in self.replay(upto=seq):
                yield frame
            return
        self.cursor = seq
        if self.run_id is None or message.get("run_id") == self.run_id:
            yield self.frame(message)


CHECK_MESSAGE: StreamCheckMessage = {"type": "stream.check"}


class LiveInbox:
    """A follower's live messages: a bounded queue for one reader, light enough to keep
    one per open socket.

    ``asyncio.Queue`` keeps three deques and an Event (about 3 KiB empty); a
    follower needs a list and, while it waits, one future. ``put_nowait`` raises
    ``asyncio.QueueFull`` once ``maxsize`` messages wait, as a Queue would.
    """

    __slots__ = ("_head", "_items", "_timer", "_touched_at", "_waiter", "maxsize")

    def __init__(self, maxsize: int = LIVE_QUEUE_MAX) -> None:
        self._items: list[LiveMessage] = []
        self._head = 0
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._touched_at = 0.0
        self.maxsize = maxsize

    def qsize(self) -> int:
        return len(self._items) - self._head

    def empty(self) -> bool:
        return self._head == len(self._items)

    @property
    def parked(self) -> bool:
        """Whether the reader is waiting in ``next()`` and nothing is queued or on its way."""
        waiter = self._waiter
        return waiter is not None and not waiter.done() and self.empty()

    def touch(self, now: float) -> None:
        """Count traffic that went past the queue at ``now`` (``admit_parked``): the
        reader's ``next()`` times out ``timeout`` after the last message or touch."""
        self._touched_at = now

    def put_nowait(self, message: LiveMessage) -> None:
        if self.qsize() >= self.maxsize:
            raise asyncio.QueueFull
        self._items.append(message)
        if self._waiter is not None:
            _wake(self._waiter)

    def get_nowait(self) -> LiveMessage:
        if self.empty():
            raise asyncio.QueueEmpty
        message = self._items[self._head]
        self._head += 1
        if self._head == len(self._items):
            self._items.clear()
            self._head = 0
        return message

    async def next(self, timeout: float) -> LiveMessage | None:
        """The next message, or None after ``timeout`` seconds without one.

        One timer handle while it waits, not ``asyncio.timeout``'s scope object
        and handle (nor ``wait_for``'s task) per follower and wait.
        """
        if self.empty():
            await self._wait(timeout)
            if self.empty():
                return None
        return self.get_nowait()

    async def _wait(self, timeout: float) -> None:
        if self._waiter is not None:
            raise RuntimeError("a LiveInbox has one reader")
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        self._timer = loop.call_later(timeout, self._expire, timeout)
        try:
            await waiter
        finally:
            self._waiter = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _expire(self, timeout: float) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        remaining = self._touched_at + timeout - time.monotonic()
        if remaining > 0:  # touched meanwhile: the quiet time starts from the touch
            self._timer = asyncio.get_running_loop().call_later(remaining, self._expire, timeout)
            return
        self._timer = None
        waiter.set_result(None)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@log_read
def credential_read(credential: Credential) -> bool:
    return credential_holds(credential)


# What this process last learnt of each credential, shared by all its followers:
# when a read found it holding. Thousands of followers opened with one API token
# (or one login) re-check it once per ``idle_s``, not once each.
_confirmed: dict[Credential, float] = {}
CONFIRMED_MAX = 10_000
# Reads under way, per event loop, by (credential, the credentials.changed message
# that prompted them or None): followers that need the same answer wait for one read.
# A message's read is shared only by those that got that message, so none of them
# can be answered by a read begun before the change it announces.
_flights: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[Credential, int], tuple[object, asyncio.Future[bool]]]
] = weakref.WeakKeyDictionary()


async def credential_check(credential: Credential, cause: object | None = None) -> bool:
    """Whether ``credential`` still holds, read once for every follower asking at the
    same time (for the same ``cause``)."""
    flights = _flights.setdefault(asyncio.get_running_loop(), {})
    key = (credential, id(cause))
    flight = flights.get(key)
    if flight is None:
        future = asyncio.ensure_future(credential_read(credential))
        # The entry keeps ``cause`` alive, so its id names no other message meanwhile.
        flights[key] = flight = (cause, future)
        future.add_done_callback(lambda _: flights.pop(key, None))
        future.add_done_callback(functools.partial(_confirm, credential, time.monotonic()))
    return await asyncio.shield(flight[1])


def _confirm(credential: Credential, asked_at: float, future: asyncio.Future[bool]) -> None:
    if future.cancelled() or future.exception() is not None or not future.result():
        _confirmed.pop(credential, None)
        return
    if len(_confirmed) >= CONFIRMED_MAX:
        _confirmed.clear()
    _confirmed[credential] = max(asked_at, _confirmed.get(credential, asked_at))


class CredentialWatch:
    """Ends a follower whose credential no longer holds (see ``agentsite.credentials``).

    The follower's queue also gets its user's ``credentials.changed`` messages;
    each prompts a re-read of the credential. The follower's idle ticks and, on a
    busy stream, the first message after ``idle_s`` without a check prompt one
    too, unless another follower of this process had it confirmed meanwhile.
    """

    def __init__(self, credential: Credential, deliver: fanout.Deliver) -> None:
        self.credential = credential
        self.subscription = fanout.join(credentials_group(credential.user_id), deliver)
        self.checked_at = time.monotonic()

    def fresh(self, idle_s: float, now: float) -> bool:
        """Whether the credential was confirmed less than ``idle_s`` ago, by this follower
        or another of this process."""
        if now - self.checked_at < idle_s:
            return True
        confirmed = _confirmed.get(self.credential)
        if confirmed is not None and now - confirmed < idle_s:
            self.checked_at = confirmed
            return True
        return False

    async def check(self, message: LiveMessage | None, idle_s: float) -> None:
        """Raise CredentialRevoked if ``message`` (None: an idle tick) shows it has gone."""
        changed = message is not None and message["type"] == "credentials.changed"
        if changed and self.credential.ended_by(cast(CredentialsChangedMessage, message)):
            raise CredentialRevoked()
        now = time.monotonic()
        if not changed and self.fresh(idle_s, now):
            return
        try:
            holds = await credential_check(self.credential, message if changed else None)
        except DATABASE_AWAY:
            return  # the database is away: the next tick asks again
        self.checked_at = now
        if not holds:
            raise CredentialRevoked()


def admit_parked(
    tail: LogTail,
    live: LiveInbox,
    message: dict[str, Any],
    idle_s: float,
    watch: CredentialWatch | None = None,
) -> Frame | None:
    """The frame for ``message`` if it can go out now, from the feed's delivery, without
    waking the follower; None if the message must go through ``live`` (``follow``).

    That holds for the next event of the log, for a follower caught up and
    parked in ``live`` with nothing queued, whose credential was checked less
    than ``idle_s`` ago: ``follow`` would do nothing else with it than yield its
    frame. A feed delivering to thousands of followers so writes each frame in
    one loop, instead of waking thousands of tasks. The caller sends the frame
    before anything else it sends (the cursor has moved past it).
    """
    if message["type"] != "session.event" or tail.run_id is not None or not live.parked:
        return None
    seq = int(message["seq"])
    if seq != tail.cursor + 1:
        return None
    now = time.monotonic()
    if watch is not None and not watch.fresh(idle_s, now):
        return None
    tail.cursor = seq
    live.touch(now)
    return tail.frame(cast(SessionEventMessage, message))


async def follow(
    tail: LogTail,
    live: LiveInbox,
    subscription: fanout.Subscription,
    idle_s: float,
    watch: CredentialWatch | None = None,
) -> AsyncIterator[Frame | None]:
    """Replay, then live. ``live`` receives the group's messages from ``subscription`` on.

    Yields ``None`` once caught up with the log and after each ``idle_s`` without
    traffic (a heartbeat); an idle follower re-reads the log, so a notification
    lost by Redis costs latency, never data. With a ``watch``, raises
    CredentialRevoked once the follower's credential no longer holds.
    """
    if watch is None:
        await subscription.ready()
    else:
        await asyncio.gather(subscription.ready(), watch.subscription.ready())
    async for frame in tail.replay():
        yield frame
    yield None  # caught up
    while True:
        message = await live.next(idle_s)
        if watch is not None:
            await watch.check(message, idle_s)
        if message is None:
            yield None
            message = CHECK_MESSAGE
        if message["type"] == "stream.check":
            async for frame in tail.replay():
                yield frame
        elif message["type"] == "session.event":
            async for frame in tail.admit(message):
                yield frame


class LayerFollower:
    """A session group's live messages, from the process's shared feed, in a bounded queue.

    With a ``credential``, its user's ``credentials.changed`` messages too (``watch``).
    """

    def __init__(self, group: str, credential: Credential | None = None) -> None:
        self.group = group
        self.credential = credential
        self.queue = LiveInbox(LIVE_QUEUE_MAX)
        self.overflowed = False
        self.watch: CredentialWatch | None = None

    async def __aenter__(self) -> LayerFollower:
        self.subscription = fanout.join(self.group, self.put)
        if self.credential is not None:
            self.watch = CredentialWatch(self.credential, self.put)
        return self

    def put(self, message: dict[str, Any]) -> None:
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(cast(LiveMessage, message))
        except asyncio.QueueFull:
            self.overflowed = True

    async def __aexit__(self, *exc: object) -> None:
        await self.subscription.leave()
        if self.watch is not None:
            await self.watch.subscription.leave()
