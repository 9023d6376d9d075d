"""The session websocket: authenticate, join the group, replay after the token, forward.

Close codes sent before any data: 4401 no valid credentials, 4404 not your
session (or a token for another one), 4400 a malformed token. 4429 means the
client fell behind the live stream; it reconnects with its last token. 4401
later on: the credential the socket was opened with has gone (its API token
revoked, its user deactivated, its login session logged out).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal, NamedTuple, TypedDict, cast
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from accounts.credentials import Credential, CredentialRevoked
from accounts.models import ApiToken
from agentsite.compat import channels as compat_channels
from agentsite.core import fanout
from agentsite.core.errors import DomainError
from agentsite.core.queries import get_or_none
from agentsite.web.auth import api_token_for, token_credential
from agentsite.web.origin import offered_api_token
from agentsite.web.wire import Wire, drained, text_frame_once, wire_of
from sessions import services, streams
from sessions.models import AgentSession
from sessions.payloads import LiveMessage
from sessions.services import SessionNotFound
from sessions.tokens import BadToken, ForeignToken, session_token_seq

log = logging.getLogger(__name__)

CLOSE_BAD_TOKEN = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_SLOW = 4429
SUBPROTOCOL = "agentsite"
MAX_FRAME_CHARS = 64 * 1024
MAX_MESSAGE_CHARS = 32_000
CLIENT_FRAME_TYPES = frozenset({"message", "stop_job", "interrupt", "ping"})


# --- what a client sends -------------------------------------------------------------------


class MessageFrame(TypedDict):
    type: Literal["message"]
    text: str


class StopJobFrame(TypedDict):
    type: Literal["stop_job"]
    job_id: str


class InterruptFrame(TypedDict):
    type: Literal["interrupt"]


class PingFrame(TypedDict):
    type: Literal["ping"]


ClientFrame = MessageFrame | StopJobFrame | InterruptFrame | PingFrame


# --- what it is answered (beside the stream's event frames, ``streams.Frame``) ---------------


class MessageReply(TypedDict):
    type: Literal["message"]
    seq: int
    run_id: str


class StopJobReply(TypedDict):
    type: Literal["stop_job"]
    job_id: str
    state: str


class InterruptReply(TypedDict):
    type: Literal["interrupt"]
    run_id: str
    state: str


class PongReply(TypedDict):
    type: Literal["pong"]


class ErrorReply(TypedDict):
    type: Literal["error"]
    code: str
    message: str


Reply = MessageReply | StopJobReply | InterruptReply | PongReply | ErrorReply
PONG: PongReply = {"type": "pong"}


def idle_check_s() -> float:
    """A follower with no traffic for this long re-reads the log and re-checks its credential
    (see streams.follow)."""
    return float(settings.AGENTSITE_WS_IDLE_CHECK_S)


@streams.log_read
def token_read(raw: str) -> ApiToken | None:
    return api_token_for(raw)


async def caller(scope: dict[str, Any]) -> tuple[AbstractBaseUser, Credential] | None:
    """Who opened the socket, and with what: the offered API token, else the login cookie."""
    raw_token = offered_api_token(scope)
    if raw_token:
        api_token = await token_read(raw_token)
        if api_token is None:
            return None
        return api_token.user, token_credential(api_token)
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    return user, Credential(user_id=user.pk, session_key=scope["session"].session_key)


class ClientFrameError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def client_frame_parse(text_data: str | None, bytes_data: bytes | None) -> ClientFrame:
    """A validated client frame, or ClientFrameError saying what is wrong with it."""
    if text_data is None:
        raise ClientFrameError("bad_frame", "Send JSON text frames, not binary ones.")
    if len(text_data) > MAX_FRAME_CHARS:
        raise ClientFrameError("too_large", f"Frames are limited to {MAX_FRAME_CHARS} characters.")
    try:
        frame = json.loads(text_data)
    except (ValueError, RecursionError) as exc:
        raise ClientFrameError("bad_frame", "The frame is not valid JSON.") from exc
    if not isinstance(frame, dict) or frame.get("type") not in CLIENT_FRAME_TYPES:
        raise ClientFrameError(
            "bad_frame", "Expected an object whose type is message, stop_job, interrupt or ping."
        )
    text = frame.get("text")
    if frame["type"] == "message":
        if not isinstance(text, str) or not text.strip():
            raise ClientFrameError("bad_frame", "A message needs a non-empty 'text' string.")
        if len(text) > MAX_MESSAGE_CHARS:
            limit = f"Messages are limited to {MAX_MESSAGE_CHARS} characters."
            raise ClientFrameError("too_large", limit)
    if frame["type"] == "stop_job" and not isinstance(frame.get("job_id"), str):
        raise ClientFrameError("bad_frame", "stop_job needs a 'job_id' string.")
    return cast(ClientFrame, frame)


class Follower(NamedTuple):
    """Whom a socket follows for: ids only. A process holds thousands of sockets, so
    none keeps model instances; a client frame reads what it acts on again (a
    session deleted since the socket opened refuses it)."""

    user_id: int
    session_id: str


def follower_user(follower: Follower) -> AbstractBaseUser:
    user = get_or_none(get_user_model().objects.filter(pk=follower.user_id, is_active=True))
    if user is None:
        raise SessionNotFound()
    return user


def follower_session(follower: Follower) -> AgentSession:
    return services.session_for(owner=follower_user(follower), session_id=follower.session_id)


@database_sync_to_async
def message_send(follower: Follower, text: str) -> MessageReply:
    event, run = services.message_post(session=follower_session(follower), text=text)
    return {"type": "message", "seq": event.seq, "run_id": run.id}


@database_sync_to_async
def job_stop(follower: Follower, job_id: str) -> StopJobReply:
    return {
        "type": "stop_job",
        "job_id": job_id,
        "state": services.job_stop(owner=follower_user(follower), job_id=job_id),
    }


@database_sync_to_async
def run_interrupt(follower: Follower) -> InterruptReply:
    run_id, state = services.session_interrupt(session=follower_session(follower))
    return {"type": "interrupt", "run_id": run_id, "state": state}


session_mark_seen = database_sync_to_async(services.session_mark_seen)


async def client_frame_act(frame: ClientFrame, follower: Follower) -> Reply:
    """Carry out a client frame through the services; their refusals become error frames."""
    try:
        if frame["type"] == "message":
            return await message_send(follower, frame["text"])
        if frame["type"] == "stop_job":
            return await job_stop(follower, frame["job_id"])
        if frame["type"] == "interrupt":
            return await run_interrupt(follower)
        return PONG
    except DomainError as exc:
        raise ClientFrameError(exc.code, exc.message) from exc
    except Exception as exc:
        log.exception("client frame %s failed", frame["type"])
        raise ClientFrameError("internal_error", "The server could not do that.") from exc


class SessionConsumer(AsyncWebsocketConsumer):
    # Live messages come from the process's shared feed (agentsite.core.fanout), never
    # through a channel of the consumer's own. Naming no configured layer, Channels
    # gives it none: no Redis subscription per connection (a reconnect storm's cost)
    # and no reader task per open socket.
    channel_layer_alias = "agentsite.shared-feed-only"
    live_queue_max = streams.LIVE_QUEUE_MAX
    # Set once the client is admitted and following; None while refused.
    forwarder: asyncio.Task[None] | None = None
    # The daphne connection, when the socket is daphne's: frames are written to it
    # directly (agentsite.web.wire), the ASGI send serving everything else.
    wire: Wire | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Channels' consumer loop for a consumer without a channel layer: the client's
        messages dispatched in turn, as Channels does, but without the task and the
        ``asyncio.wait`` per socket that its loop spends to watch a single source
        (``agentsite.compat.channels``)."""
        await compat_channels.serve_without_layer(self, scope, receive, send)

    async def connect(self) -> None:
        protocols = self.scope.get("subprotocols", [])
        await self.accept(SUBPROTOCOL if SUBPROTOCOL in protocols else None)
        self.by_cookie = not offered_api_token(self.scope)
        found = await caller(self.scope)
        if found is None:
            return await self.close(CLOSE_UNAUTHENTICATED)
        user, credential = found
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        try:
            session = await streams.session_read(owner=user, session_id=session_id)
        except SessionNotFound:
            return await self.close(CLOSE_NOT_FOUND)
        self.follower = Follower(user_id=user.pk, session_id=session.id)
        query = parse_qs(self.scope.get("query_string", b"").decode("latin1"))
        try:
            after = session_token_seq(
                query.get("after", [""])[0], session_id=session_id, owner_id=user.pk
            )
        except BadToken:
            return await self.close(CLOSE_BAD_TOKEN)
        except ForeignToken:
            return await self.close(CLOSE_NOT_FOUND)
        self.tail = streams.LogTail(session_id=session_id, owner_id=user.pk, after=after)
        self.live = streams.LiveInbox(self.live_queue_max)
        self.idle_s = idle_check_s()
        self.wire = wire_of(self.scope)
        self.send_buffer_max = int(settings.AGENTSITE_STREAM_SEND_BUFFER_MAX)
        self.subscription = fanout.join(session.group_name, self.enqueue)
        self.watch = streams.CredentialWatch(credential, self.enqueue)
        self.forwarder = asyncio.create_task(self.forward())

    async def forward(self) -> None:
        try:
            async for frame in streams.follow(
                self.tail, self.live, self.subscription, self.idle_s, self.watch
            ):
                if frame is None:
                    continue
                if self.wire is not None and not await drained(
                    self.wire, self.send_buffer_max, settings.AGENTSITE_STREAM_STALL_S
                ):
                    return await self.close(CLOSE_TOO_SLOW)
                if not self.write_now(frame):
                    await self.send(text_data=streams.frame_json(frame))
        except CredentialRevoked:
            # The token was revoked, the user deactivated or logged out.
            await self.close(CLOSE_UNAUTHENTICATED)
        except Exception:
            log.exception("stream of %s failed", self.tail.session_id)
            await self.close(1011)

    def fallen_behind(self) -> bool:
        """Whether the client has left more than ``AGENTSITE_STREAM_SEND_BUFFER_MAX`` bytes
        unread: the next frame then waits in the forwarder (``agentsite.web.wire.drained``)."""
        return self.wire is not None and self.wire.unsent() > self.send_buffer_max

    def write_now(self, frame: streams.Frame) -> bool:
        """Write ``frame`` straight to daphne's socket if it can be (agentsite.web.wire)."""
        if self.wire is None or not self.wire.ready():
            return False
        self.wire.write(text_frame_once(streams.frame_json(frame)))
        return True

    def enqueue(self, message: dict[str, Any]) -> None:
        """Take a live message of the session's group (from the process's shared feed).

        The next event for a follower waiting for it is written at once, in the
        feed's loop over its followers (``streams.admit_parked``); anything else
        wakes the forwarder.
        """
        if self.forwarder is None or self.forwarder.done():
            return
        if self.wire is not None and self.wire.ready() and not self.fallen_behind():
            frame = streams.admit_parked(self.tail, self.live, message, self.idle_s, self.watch)
            if frame is not None:
                self.write_now(frame)  # ready, as just checked: written
                return
        try:
            self.live.put_nowait(cast(LiveMessage, message))
        except asyncio.QueueFull:
            # Falling behind: cut the client off rather than buffer without bound.
            self.forwarder.cancel()
            self.closing = asyncio.create_task(self.close(CLOSE_TOO_SLOW))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.forwarder is None:
            return
        reply: Reply
        try:
            frame = client_frame_parse(text_data, bytes_data)
            if frame["type"] == "ping":
                self.live.put_nowait(streams.CHECK_MESSAGE)
            reply = await client_frame_act(frame, self.follower)
        except ClientFrameError as exc:
            reply = {"type": "error", "code": exc.code, "message": exc.message}
        except asyncio.QueueFull:
            reply = PONG
        await self.send(text_data=json.dumps(reply))

    async def disconnect(self, code: int) -> None:
        if self.forwarder is None:
            return
        self.forwarder.cancel()
        await self.subscription.leave()
        await self.watch.subscription.leave()
        if self.by_cookie:
            await session_mark_seen(session_id=self.follower.session_id, seq=self.tail.cursor)
