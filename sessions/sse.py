"""Server-sent events: a session's stream and a run's, over ``sessions.streams``.

The HTTP edge of the stream core: authenticate, look the session or run up
through its ownership rule, read the client's position from its token, then
write the core's frames as ``text/event-stream`` events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router

from accounts.credentials import Credential, CredentialRevoked
from agentsite.web.auth import request_credential, request_user
from agentsite.web.http import errors
from agentsite.web.wire import ResponseWire, response_wire_of, written_when_drained
from sessions.models import AgentSession, Event
from sessions.streams import (
    Frame,
    LayerFollower,
    LogTail,
    follow,
    frame_json,
    run_is_finished,
    run_read,
    session_read,
)
from sessions.tokens import run_token_seq, session_token_seq

router = Router(tags=["streams"])
# The operations keep the ids the API document has always given them (ninja
# derives an id from the module's name), so the links that name them still hold.

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
    return f"id: {frame['token']}\ndata: {frame_json(frame)}\n\n"


async def sse_body(
    tail: LogTail,
    group: str,
    credential: Credential,
    *,
    until_run_ends: bool = False,
    wire: ResponseWire | None = None,
) -> AsyncIterator[str]:
    """The event stream: frames as SSE events, comments as heartbeats.

    It ends when the credential it was opened with no longer holds (a token
    revoked, the user deactivated or logged out): a reconnect is then a 401. A
    client that leaves more than ``AGENTSITE_STREAM_SEND_BUFFER_MAX`` bytes unread
    (``wire``: the connection, under daphne) is waited for, and dropped once it has
    not read for ``AGENTSITE_STREAM_STALL_S``; it reconnects with ``Last-Event-ID``.

    Under daphne, events are written to the connection (``ResponseWire.write``) rather
    than yielded: each yielded part passes Django's response loop, every ASGI
    middleware's ``send`` and daphne's dispatch on its way to the same write. What is
    yielded (the opening lines, heartbeats, a run's last events) still goes through
    ASGI, in order with what was written: both end in the request's ``write``.
    """
    unread_max = int(settings.AGENTSITE_STREAM_SEND_BUFFER_MAX)
    stall_s = float(settings.AGENTSITE_STREAM_STALL_S)
    yield f"retry: 2000\n: following {tail.session_id} after seq {tail.cursor}\n\n"
    async with LayerFollower(group, credential) as live:
        try:
            async for frame in follow(
                tail, live.queue, live.subscription, heartbeat_s(), live.watch
            ):
                if live.overflowed:
                    return  # too slow: the client reconnects with Last-Event-ID
                if frame is None:
                    if until_run_ends and tail.run_id and await run_is_finished(tail.run_id):
                        # The run may have ended after the last read of the log: its
                        # last events, run_finished among them, committed with its
                        # status, so one more read brings the client to the end.
                        async for last in tail.replay():
                            yield sse_event(last)
                        return
                    yield ": heartbeat\n\n"
                    continue
                if wire is None:
                    yield sse_event(frame)
                elif not await written_when_drained(
                    wire, sse_event(frame).encode(), unread_max, stall_s
                ):
                    return  # dropped as stalled, or the response is over
                if until_run_ends and frame["kind"] == Event.Kind.RUN_FINISHED:
                    return
        except CredentialRevoked:
            yield ": credentials revoked\n\n"


async def release_request_connection() -> None:
    """Give back the database connection this request's authentication opened.

    Django closes it when the response ends, which for a stream is minutes or
    hours later: a few hundred followers would hold a few hundred connections
    (PostgreSQL refuses new clients past ``max_connections``; the web process's
    pool would run dry). A stream reads the log through ``streams.log_read``, whose
    calls take and return a connection each. Called first thing, so that a
    request never holds one connection while it waits for another: with a
    bounded pool, that is a deadlock once enough streams open at once.
    """
    await sync_to_async(connections.close_all)()


def request_wire(request: HttpRequest) -> ResponseWire | None:
    """The connection under the response, when daphne serves it (an ASGI request's scope)."""
    return response_wire_of(getattr(request, "scope", {}))


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
    operation_id="sessions_streams_session_stream",
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
    session = await session_read(owner=user, session_id=session_id)
    seq = session_token_seq(resume_token(request, after), session_id=session.id, owner_id=user.pk)
    tail = LogTail(session_id=session.id, owner_id=user.pk, after=seq)
    credential = request_credential(request)
    wire = request_wire(request)
    return sse_response(sse_body(tail, session.group_name, credential, wire=wire))


@router.get(
    "/runs/{run_id}/stream",
    operation_id="sessions_streams_run_stream",
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
    run = await run_read(owner=user, run_id=run_id)
    seq = run_token_seq(resume_token(request, continuation_token), run_id=run.id, owner_id=user.pk)
    tail = LogTail(session_id=run.session_id, owner_id=user.pk, after=seq or 0, run_id=run.id)
    group = f"{AgentSession.group_prefix()}{run.session_id}"
    credential = request_credential(request)
    wire = request_wire(request)
    return sse_response(sse_body(tail, group, credential, until_run_ends=True, wire=wire))
