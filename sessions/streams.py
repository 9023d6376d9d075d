"""Resumable session streams: replay from the log, then tail the live channel.

Both transports — the websocket consumer and the server-sent-event views below —
follow a session the same way:

1. join the session's channel-layer group, then wait until a marker sent to
   that group comes back, which proves the subscription is live in Redis;
2. replay every logged event after the client's position;
3. forward live notifications, dropping seqs already delivered and reading any
   seq skipped by the live channel back from the log.

Because every event is committed before it is published, anything the replay
did not see is published after the marker and so reaches the live queue: the
client gets each event exactly once and in order, however the two race.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connections
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router

from agentsite.auth import request_user
from agentsite.core.errors import NotFound
from agentsite.core.ids import is_id
from agentsite.core.queries import get_or_none
from agentsite.http import errors
from sessions.api import token_api_error
from sessions.models import AgentSession, Event, Run
from sessions.tokens import (
    BadToken,
    ForeignToken,
    run_token,
    run_token_seq,
    session_token,
    session_token_seq,
)

log = logging.getLogger(__name__)

REPLAY_PAGE = 200
# Live notifications a follower may hold before it counts as too slow; it is
# then cut off and resumes from its last token instead of growing in memory.
LIVE_QUEUE_MAX = 1000
BARRIER_TIMEOUT_S = 2.0
SYNC_TYPE = "stream.sync"
CHECK_TYPE = "stream.check"

Frame = dict[str, Any]


# --- log access ------------------------------------------------------------------------

# Reads for many connections at once run in parallel threads rather than
# queueing on the one thread-sensitive executor.
log_read = functools.partial(database_sync_to_async, thread_sensitive=False)


@log_read
def owned_session(user: AbstractBaseUser, session_id: str) -> AgentSession | None:
    if not is_id("ses", session_id):
        return None
    return get_or_none(
        AgentSession.objects.filter(pk=session_id, owner_id=user.pk, deleted_at__isnull=True)
    )


@log_read
def owned_run(user: AbstractBaseUser, run_id: str) -> Run | None:
    if not is_id("run", run_id):
        return None
    return get_or_none(Run.objects.filter(pk=run_id, owner_id=user.pk))


@log_read
def run_is_finished(run_id: str) -> bool:
    status = get_or_none(Run.objects.filter(pk=run_id).values_list("status", flat=True))
    return status is None or status in Run.TERMINAL


@log_read
def events_after(
    *, session_id: str, after: int, upto: int | None, run_id: str | None, limit: int
) -> list[dict[str, Any]]:
    rows = Event.objects.filter(session_id=session_id, seq__gt=after)
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    fields = ("seq", "kind", "payload", "run_id")
    return list(rows.order_by("seq").values(*fields)[:limit])


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

    def frame(self, event: dict[str, Any]) -> Frame:
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

    async def admit(self, message: dict[str, Any]) -> AsyncIterator[Frame]:
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


def sync_message(nonce: str) -> dict[str, Any]:
    return {"type": SYNC_TYPE, "nonce": nonce}


# Followers of a group in one process share one Redis subscription (per event
# loop). Once one marker has come back through it, later followers of the same
# group need no marker of their own while the subscription lasts, that is while
# a local follower remains: this keeps N followers of one session from costing
# N² marker deliveries.
_local_followers: dict[tuple[int, str], int] = {}
_proven_groups: set[tuple[int, str]] = set()


def _group_key(group: str) -> tuple[int, str]:
    return (id(asyncio.get_running_loop()), group)


def follower_join(group: str) -> str | None:
    """Count a local follower (after its ``group_add``); the marker nonce it must wait for,
    or None when the group's subscription is already proven live."""
    key = _group_key(group)
    _local_followers[key] = _local_followers.get(key, 0) + 1
    return None if key in _proven_groups else new_nonce()


def follower_proven(group: str) -> None:
    key = _group_key(group)
    if key in _local_followers:
        _proven_groups.add(key)


def follower_leave(group: str) -> None:
    """Uncount a follower (before its ``group_discard``, which may end the subscription)."""
    key = _group_key(group)
    left = _local_followers.get(key, 1) - 1
    if left > 0:
        _local_followers[key] = left
    else:
        _local_followers.pop(key, None)
        _proven_groups.discard(key)


async def follow(
    tail: LogTail,
    live: asyncio.Queue[dict[str, Any]],
    group: str,
    nonce: str | None,
    idle_s: float,
) -> AsyncIterator[Frame | None]:
    """Replay, then live. ``live`` receives the group's messages (after our marker, if any).

    Yields ``None`` once caught up with the log and after each ``idle_s`` without
    traffic (a heartbeat); an idle follower re-reads the log, so a notification
    lost by Redis costs latency, never data.
    """
    early: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(BARRIER_TIMEOUT_S):
            while nonce is not None and (arrived := await live.get()) != sync_message(nonce):
                early.append(arrived)
        follower_proven(group)
    except TimeoutError:
        log.warning("stream marker for %s did not come back; replaying anyway", tail.session_id)
    async for frame in tail.replay():
        yield frame
    yield None  # caught up
    pending = iter(early)
    while True:
        message: dict[str, Any] | None = next(pending, None)
        if message is None:
            try:
                message = await asyncio.wait_for(live.get(), idle_s)
            except TimeoutError:
                yield None
                message = {"type": CHECK_TYPE}
        if message.get("type") == CHECK_TYPE:
            async for frame in tail.replay():
                yield frame
        elif message.get("type") == "session.event":
            async for frame in tail.admit(message):
                yield frame


def new_nonce() -> str:
    return uuid.uuid4().hex


# --- server-sent events ---------------------------------------------------------------------

router = Router(tags=["streams"])

# One frame, the JSON in each event's ``data:`` line.
FRAME_SCHEMA = {
    "type": "object",
    "required": ["seq", "kind", "payload", "token"],
    "properties": {
        "seq": {"type": "integer", "minimum": 1, "description": "The event's place in the log."},
        "kind": {"type": "string", "enum": [kind.value for kind in Event.Kind]},
        "payload": {"type": "object", "description": "What the event says; depends on kind."},
        "token": {"type": "string", "description": "Continuation token (as in `id:`)."},
    },
}
# One server-sent event as an EventSource sees it (a comment line is no event).
# In OpenAPI 3.1 the schema of a text/event-stream describes each of its events.
SSE_EVENT_SCHEMA = {
    "type": "object",
    "required": ["id", "data"],
    "properties": {
        "id": {"type": "string", "description": "Continuation token: resume after this event."},
        "event": {"const": "message", "description": "Always the default type."},
        "retry": {"type": "integer", "description": "Reconnection delay in ms (first event)."},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": FRAME_SCHEMA,
        },
    },
}
SSE_OPENAPI = {
    "responses": {
        200: {
            "description": "A text/event-stream. Each event's `id:` is its continuation token "
            "and its `data:` one JSON frame; a comment line (`: heartbeat`) comes every 15 s "
            "without traffic, and `retry:` once at the start.",
            "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}},
        }
    }
}


def heartbeat_s() -> float:
    return float(getattr(settings, "AGENTSITE_SSE_HEARTBEAT_S", 15.0))


def sse_event(frame: Frame) -> str:
    return f"id: {frame['token']}\ndata: {json.dumps(frame, separators=(',', ':'))}\n\n"


class LayerFollower:
    """A private channel in a session's group, read into a bounded queue.

    Reading through a task (rather than cancelling ``layer.receive`` on a
    timeout) keeps the channel subscribed for the whole stream.
    """

    def __init__(self, group: str) -> None:
        self.group = group
        self.layer = get_channel_layer()
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=LIVE_QUEUE_MAX)
        self.overflowed = False
        self.nonce: str | None = None

    async def __aenter__(self) -> LayerFollower:
        assert self.layer is not None, "CHANNEL_LAYERS is not configured"
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        self.nonce = follower_join(self.group)
        self.reader = asyncio.create_task(self.read())
        if self.nonce is not None:
            await self.layer.group_send(self.group, sync_message(self.nonce))
        return self

    async def read(self) -> None:
        assert self.layer is not None
        while True:
            message = await self.layer.receive(self.channel)
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


async def sse_body(
    tail: LogTail, group: str, *, until_run_ends: bool = False
) -> AsyncIterator[str]:
    """The event stream: frames as SSE events, comments as heartbeats."""
    yield f"retry: 2000\n: following {tail.session_id} after seq {tail.cursor}\n\n"
    async with LayerFollower(group) as live:
        async for frame in follow(tail, live.queue, group, live.nonce, heartbeat_s()):
            if live.overflowed:
                return  # too slow: the client reconnects with Last-Event-ID
            if frame is None:
                if until_run_ends and tail.run_id and await run_is_finished(tail.run_id):
                    return
                yield ": heartbeat\n\n"
                continue
            yield sse_event(frame)
            if until_run_ends and frame["kind"] == Event.Kind.RUN_FINISHED:
                return


async def release_request_connection() -> None:
    """Give back the database connection this request's authentication opened.

    Django closes it when the response ends, which for a stream is minutes or
    hours later: a few hundred followers would hold a few hundred connections
    (PostgreSQL refuses new clients past ``max_connections``; the web process's
    pool would run dry). A stream reads the log through ``log_read``, whose
    calls take and return a connection each. Called first thing, so that a
    request never holds one connection while it waits for another: with a
    bounded pool, that is a deadlock once enough streams open at once.
    """
    await sync_to_async(connections.close_all)()


def sse_response(body: AsyncIterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # proxies must not hold events back
    return response


def resume_token(request: HttpRequest, query_token: str) -> str:
    """``Last-Event-ID`` (sent by a reconnecting EventSource) wins over the query string."""
    return request.headers.get("Last-Event-ID", "").strip() or query_token


@router.get(
    "/sessions/{session_id}/stream",
    response=errors(400, 404),
    summary="Follow a session's events (server-sent events)",
    openapi_extra=SSE_OPENAPI,
    description="Replays every event after `after` (or `Last-Event-ID`), then streams live "
    "events; a comment line every 15 s keeps the connection open. Each `id:` is a "
    "continuation token: reconnect with it and nothing is lost or repeated.",
)
async def session_stream(
    request: HttpRequest, session_id: str, after: str = ""
) -> StreamingHttpResponse:
    await release_request_connection()
    user = request_user(request)
    session = await owned_session(user, session_id)
    if session is None:
        raise NotFound(f"No session {session_id!r}.")
    token = resume_token(request, after)
    try:
        seq = session_token_seq(token, session_id=session.id, owner_id=user.pk)
    except (BadToken, ForeignToken) as exc:
        raise token_api_error(exc) from exc
    tail = LogTail(session_id=session.id, owner_id=user.pk, after=seq)
    return sse_response(sse_body(tail, session.group_name))


@router.get(
    "/runs/{run_id}/stream",
    response=errors(400, 404),
    summary="Follow one run's events until it ends (server-sent events)",
    openapi_extra=SSE_OPENAPI,
    description="The events one background run produces, from its start or after "
    "`continuation_token` (or `Last-Event-ID`); the stream ends when the run ends. "
    "Feed the last `id:` back as `continuation_token` to resume.",
)
async def run_stream(
    request: HttpRequest, run_id: str, continuation_token: str = ""
) -> StreamingHttpResponse:
    await release_request_connection()
    user = request_user(request)
    run = await owned_run(user, run_id)
    if run is None:
        raise NotFound(f"No run {run_id!r}.")
    token = resume_token(request, continuation_token)
    try:
        seq = run_token_seq(token, run_id=run.id, owner_id=user.pk)
    except (BadToken, ForeignToken) as exc:
        raise token_api_error(exc) from exc
    tail = LogTail(session_id=run.session_id, owner_id=user.pk, after=seq or 0, run_id=run.id)
    group = f"{AgentSession.group_prefix()}{run.session_id}"
    return sse_response(sse_body(tail, group, until_run_ends=True))
