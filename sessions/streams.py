"""Resumable session streams: replay from the log, then tail the live channel.

Both transports — the websocket consumer (``sessions.consumers``) and the
server-sent-event views (``sessions.sse``) — follow a session the same way:

1. join the session's channel-layer group, then wait until a marker sent to
   that group comes back, which proves the subscription is live in Redis;
2. replay every logged event after the client's position;
3. forward live notifications, dropping seqs already delivered and reading any
   seq skipped by the live channel back from the log.

Because every event is committed before it is published, anything the replay
did not see is published after the marker and so reaches the live queue: the
client gets each event exactly once and in order, however the two race.

This is the core both edges share: it knows no HTTP.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import ParamSpec, TypedDict, TypeVar, cast

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from agentsite.core.database import DATABASE_AWAY
from agentsite.core.queries import get_or_none
from sessions.models import Event, Run
from sessions.payloads import (
    EventPayload,
    LiveMessage,
    SessionEventMessage,
    StreamCheckMessage,
    StreamSyncMessage,
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
SYNC_TYPE = "stream.sync"


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
# minute of CPU (bench/stream.py). The threads are few, so are the connections.
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
    try:
        return fn(*args, **kwargs)
    except DATABASE_AWAY:
        connections[DEFAULT_DB_ALIAS].close()  # broken by a restart: the next read reconnects
        raise


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


def sync_message(nonce: str) -> StreamSyncMessage:
    return {"type": "stream.sync", "nonce": nonce}


CHECK_MESSAGE: StreamCheckMessage = {"type": "stream.check"}


# Followers of a group in one process share one Redis subscription (per event
# loop). Once one marker has come back through it, the subscription is proven
# live for every local follower of the group, present or future, as long as one
# remains. Followers that join while a marker is on its way wait for that one
# rather than send their own: 1,000 followers connecting at once then cost one
# marker, not 1,000 markers delivered 1,000 times each.
_local_followers: dict[tuple[int, str], int] = {}
_proven_groups: set[tuple[int, str]] = set()
_pending_proofs: dict[tuple[int, str], tuple[str, asyncio.Future[None]]] = {}
_nonce_groups: dict[str, tuple[int, str]] = {}


def _group_key(group: str) -> tuple[int, str]:
    return (id(asyncio.get_running_loop()), group)


def follower_join(group: str) -> str | None:
    """Count a local follower (after its ``group_add``); the nonce of the marker it must
    send, or None when the group is proven or a marker is already on its way."""
    key = _group_key(group)
    _local_followers[key] = _local_followers.get(key, 0) + 1
    if key in _proven_groups or key in _pending_proofs:
        return None
    nonce = new_nonce()
    _pending_proofs[key] = (nonce, asyncio.get_running_loop().create_future())
    _nonce_groups[nonce] = key
    return nonce


def sync_arrived(nonce: str) -> None:
    """A marker came back to a local follower: its group's subscription is live."""
    key = _nonce_groups.pop(nonce, None)
    if key is None:
        return  # another process's marker, or one already counted
    if key in _local_followers:
        _proven_groups.add(key)
    nonce_and_proof = _pending_proofs.pop(key, None)
    if nonce_and_proof is not None and not nonce_and_proof[1].done():
        nonce_and_proof[1].set_result(None)


async def follower_wait(group: str) -> None:
    """Return once the group's subscription is proven live (or after BARRIER_TIMEOUT_S)."""
    key = _group_key(group)
    pending = _pending_proofs.get(key)
    if pending is None:
        return
    try:
        async with asyncio.timeout(BARRIER_TIMEOUT_S):
            await asyncio.shield(pending[1])
    except TimeoutError:
        log.warning("stream marker for %s did not come back; replaying anyway", group)
        if _pending_proofs.get(key) is pending:  # the next follower sends a new one
            del _pending_proofs[key]
            _nonce_groups.pop(pending[0], None)


def follower_leave(group: str) -> None:
    """Uncount a follower (before its ``group_discard``, which may end the subscription)."""
    key = _group_key(group)
    left = _local_followers.get(key, 1) - 1
    if left > 0:
        _local_followers[key] = left
        return
    _local_followers.pop(key, None)
    _proven_groups.discard(key)
    pending = _pending_proofs.pop(key, None)
    if pending is not None:
        _nonce_groups.pop(pending[0], None)
        pending[1].cancel()


async def follow(
    tail: LogTail, live: asyncio.Queue[LiveMessage], group: str, idle_s: float
) -> AsyncIterator[Frame | None]:
    """Replay, then live. ``live`` receives the group's messages from the ``group_add`` on.

    Yields ``None`` once caught up with the log and after each ``idle_s`` without
    traffic (a heartbeat); an idle follower re-reads the log, so a notification
    lost by Redis costs latency, never data.
    """
    await follower_wait(group)
    async for frame in tail.replay():
        yield frame
    yield None  # caught up
    while True:
        message = await live_next(live, idle_s)
        if message is None:
            yield None
            message = CHECK_MESSAGE
        if message["type"] == "stream.check":
            async for frame in tail.replay():
                yield frame
        elif message["type"] == "session.event":
            async for frame in tail.admit(message):
                yield frame


async def live_next(live: asyncio.Queue[LiveMessage], idle_s: float) -> LiveMessage | None:
    """The next live message, or None after ``idle_s`` without one."""
    try:
        return await asyncio.wait_for(live.get(), idle_s)
    except TimeoutError:
        return None


def new_nonce() -> str:
    return uuid.uuid4().hex


class LayerFollower:
    """A private channel in a session's group, read into a bounded queue.

    Reading through a task (rather than cancelling ``layer.receive`` on a
    timeout) keeps the channel subscribed for the whole stream.
    """

    def __init__(self, group: str) -> None:
        self.group = group
        self.layer = get_channel_layer()
        self.queue: asyncio.Queue[LiveMessage] = asyncio.Queue(maxsize=LIVE_QUEUE_MAX)
        self.overflowed = False

    async def __aenter__(self) -> LayerFollower:
        assert self.layer is not None, "CHANNEL_LAYERS is not configured"
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        nonce = follower_join(self.group)
        self.reader = asyncio.create_task(self.read())
        if nonce is not None:
            await self.layer.group_send(self.group, sync_message(nonce))
        return self

    async def read(self) -> None:
        assert self.layer is not None
        while True:
            message = await self.layer.receive(self.channel)
            if message["type"] == SYNC_TYPE:
                sync_arrived(message["nonce"])
                continue
            try:
                self.queue.put_nowait(message)
            except asyncio.QueueFull:
                self.overflowed = True
                return

    async def __aexit__(self, *exc: object) -> None:
        assert self.layer is not None
        self.reader.cancel()
        follower_leave(self.group)
        await self.layer.group_discard(self.group, self.channel)
