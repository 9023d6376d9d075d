"""The ASGI app at ``/mcp``: Bearer-token auth in front of the SDK's Streamable HTTP manager.

A request that stays open (an SSE stream, a wait for a task) ends when its
token is revoked or its user deactivated (``served_while_valid``).

Daphne sends no ASGI lifespan events, so the session manager (which owns the
task group every MCP session runs in) is started by the first request and runs
for the life of the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any, cast

from asgiref.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope
from channels.db import database_sync_to_async
from django.conf import settings
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from accounts.credentials import (
    Credential,
    CredentialsChangedMessage,
    credential_holds,
    credentials_group,
)
from accounts.models import ApiToken
from accounts.quotas import Quota, quota_limit
from agentsite.core import fanout
from agentsite.core.database import DATABASE_AWAY
from agentsite.web.auth import api_token_for, token_credential
from jobs.mcp.server import build_server
from jobs.mcp.sessions import SESSION_LIMIT_SCOPE_KEY, PerUserSessionManager

logger = logging.getLogger(__name__)

MCP_PATHS = frozenset({"/mcp", "/mcp/"})
# Larger bodies are passed on unchecked; the SDK refuses those above its own limit.
MAX_CHECKED_BODY = 4 * 1024 * 1024
# A request still open after this long starts watching its credential.
WATCH_AFTER_S = 1.0
Scope = dict[str, Any]


def bearer_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = bytes(value).decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


async def authenticate(scope: Scope) -> ApiToken | None:
    """The request's API token (its user as ``token.user``), or None."""
    token = bearer_token(scope)
    if token is None:
        return None
    return await database_sync_to_async(api_token_for)(token)  # type: ignore[no-any-return]


async def until_revoked(credential: Credential) -> None:
    """Return once ``credential`` no longer holds (see ``accounts.credentials``).

    A request shorter than ``WATCH_AFTER_S`` costs nothing; a longer one (an SSE
    stream, a wait for a task's result) then follows its user's
    ``credentials.changed`` messages and re-reads the credential on each, and
    every ``AGENTSITE_SSE_HEARTBEAT_S`` in case one was lost.
    """
    await asyncio.sleep(WATCH_AFTER_S)
    prompted = asyncio.Event()
    ended = False

    def deliver(message: dict[str, Any]) -> None:
        nonlocal ended
        if message.get("type") == "credentials.changed":
            ended = ended or credential.ended_by(cast(CredentialsChangedMessage, message))
            prompted.set()

    subscription = fanout.join(credentials_group(credential.user_id), deliver)
    try:
        await subscription.ready()
        while not ended:
            try:
                if not await database_sync_to_async(credential_holds)(credential):
                    return
            except DATABASE_AWAY:
                pass  # the database is away: ask again on the next prompt or tick
            prompted.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(prompted.wait(), settings.AGENTSITE_SSE_HEARTBEAT_S)
    finally:
        await subscription.leave()


class ResponseState:
    """Wraps ``send`` to know whether the response has started and whether it has ended.

    An event stream's headers leave with its start: daphne holds a response's
    headers until its first body bytes, and a GET stream's first event may be
    minutes away (the SDK's keep-alive comes after 15 s), so a client waiting to
    know the stream is open would wait that long.
    """

    def __init__(self, send: Any) -> None:
        self.inner = send
        self.started = False
        self.ended = False

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            self.ended = True
        await self.inner(message)
        if message["type"] == "http.response.start" and is_event_stream(message):
            await self.inner({"type": "http.response.body", "body": b"", "more_body": True})


def is_event_stream(start: dict[str, Any]) -> bool:
    return any(
        bytes(name).lower() == b"content-type"
        and bytes(value).lower().startswith(b"text/event-stream")
        for name, value in start.get("headers", [])
    )


async def served_while_valid(
    handle: Callable[[Any], Coroutine[Any, Any, None]], credential: Credential, send: Any
) -> None:
    """Run ``handle(send)``, cut short when the credential stops holding.

    A stream cut short ends its body (the client sees the stream end); a request
    not answered yet is answered 401.
    """
    state = ResponseState(send)
    handling = asyncio.create_task(handle(state))
    watching = asyncio.create_task(until_revoked(credential))
    try:
        await asyncio.wait({handling, watching}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the client went away
        handling.cancel()
        raise
    finally:
        watching.cancel()
    if handling.done():
        handling.result()
        return
    handling.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await handling
    if not state.started:
        await send_unauthorized(send)
    elif not state.ended:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_unauthorized(send: Any) -> None:
    """401 with the challenge MCP clients look for (RFC 6750)."""
    description = "Send a valid API token as 'Authorization: Bearer <token>'."
    body = json.dumps({"error": "invalid_token", "error_description": description}).encode()
    challenge = f'Bearer error="invalid_token", error_description="{description}"'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", challenge.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def header(scope: Scope, name: str) -> str | None:
    wanted = name.lower().encode()
    for key, value in scope.get("headers", []):
        if bytes(key).lower() == wanted:
            return bytes(value).decode("latin-1")
    return None


def may_open_session(scope: Scope) -> bool:
    """A POST of the handshake era (2025-11-25 and before) that names no session."""
    version = header(scope, MCP_PROTOCOL_VERSION_HEADER)
    return (
        scope["method"] == "POST"
        and header(scope, MCP_SESSION_ID_HEADER) is None
        and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)
    )


def is_jsonrpc_message(body: bytes) -> bool:
    """False for JSON that is no JSON-RPC 2.0 message; unparsable bodies are the SDK's to refuse."""
    try:
        message = json.loads(body)
    except ValueError:
        return True
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and ("method" in message or "result" in message or "error" in message)
    )


async def send_invalid_request(send: Any) -> None:
    """-32600, which the SDK's handshake-era transport reports as -32602 with pydantic text."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message"},
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def read_body(receive: Any, limit: int) -> tuple[bytes, bool]:
    """The request body (up to ``limit`` bytes) and whether it was complete."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body") or size > limit:
            return b"".join(chunks), not message.get("more_body")


def replaying(body: bytes, complete: bool, receive: Any) -> Any:
    """A ``receive`` that hands out the already-read body first, then defers to ``receive``."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replay


class McpEndpoint:
    """Authenticates each HTTP request, then hands it to the SDK's session manager."""

    def __init__(self) -> None:
        self.server = build_server()
        # No Host/Origin allow-list: a browser page cannot attach the Bearer token
        # these requests need, which is what DNS-rebinding protection guards against.
        self.manager = PerUserSessionManager(
            app=self.server,
            session_idle_timeout=settings.AGENTSITE_QUOTA_MCP_IDLE_S,
            max_sessions=settings.AGENTSITE_MCP_MAX_SESSIONS,
        )
        self._running: asyncio.Future[None] | None = None
        self._runner: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        api_token = await authenticate(scope)
        if api_token is None:
            await send_unauthorized(send)
            return
        user = api_token.user
        if scope["method"] == "POST":
            body, complete = await read_body(receive, MAX_CHECKED_BODY)
            if complete and not is_jsonrpc_message(body):
                await send_invalid_request(send)
                return
            receive = replaying(body, complete, receive)
        await self._ensure_running()
        # The SDK binds a session to the principal that opened it; the handlers read
        # the Django user from the scope of the request carrying each message.
        principal = AccessToken(token="", client_id=f"agentsite-user-{user.pk}", scopes=[])
        scope = {**scope, "user": AuthenticatedUser(principal), "agentsite.user": user}
        if may_open_session(scope):
            scope[SESSION_LIMIT_SCOPE_KEY] = await database_sync_to_async(quota_limit)(
                user_id=user.pk, quota=Quota.MCP_SESSIONS
            )

        async def handle(send: Any) -> None:
            await self.manager.handle_request(scope, receive, send)

        await served_while_valid(handle, token_credential(api_token), send)

    async def _ensure_running(self) -> None:
        if self._running is None:
            self._running = asyncio.get_running_loop().create_future()
            self._runner = asyncio.create_task(self._run_manager(self._running))
        await asyncio.shield(self._running)

    async def _run_manager(self, running: asyncio.Future[None]) -> None:
        try:
            async with self.manager.run():
                running.set_result(None)
                await asyncio.Event().wait()
        except BaseException as exc:
            if not running.done():
                running.set_exception(exc)
            raise


async def send_server_error(send: Any) -> None:
    """A JSON-RPC internal error without details: what failed is in the log only."""
    error = {"code": -32603, "message": "The server failed to answer this request."}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 500, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def answered_on_failure(endpoint: McpEndpoint, scope: Scope, receive: Any, send: Any) -> None:
    """Run the endpoint; an exception it lets out is logged and, if nothing was sent
    yet, answered with a JSON 500 (never a traceback)."""
    started = False

    async def tracking_send(message: Any) -> None:
        nonlocal started
        if message.get("type") == "http.response.start":
            started = True
        await send(message)

    try:
        await endpoint(scope, receive, tracking_send)
    except Exception:
        logger.exception("unexpected error in %s %s", scope.get("method"), scope.get("path"))
        if not started:
            await send_server_error(send)


def mcp_or(django_app: Any) -> Any:
    """Send HTTP requests for ``/mcp`` to the MCP endpoint, everything else to ``django_app``."""
    endpoint: McpEndpoint | None = None

    async def app(scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        nonlocal endpoint
        if scope["type"] == "http" and scope["path"] in MCP_PATHS:
            if endpoint is None:
                endpoint = McpEndpoint()
            await answered_on_failure(endpoint, dict(scope), receive, send)
            return
        await django_app(scope, receive, send)

    return app
