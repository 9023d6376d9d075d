"""Middleware of agentsite's own."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

from agentsite.compat import daphne as compat_daphne
from agentsite.web.http import error_body


class SyncChainMiddleware:
    """Last in ``MIDDLEWARE``: the chain above it runs synchronously, in one thread.

    Under ASGI, Django runs each hook of every ``MiddlewareMixin`` middleware
    (all of its own) through ``sync_to_async``: a dozen thread hand-offs per
    request with the stock list. A synchronous-only middleware innermost makes
    Django build the whole chain in synchronous mode and adapt it once.
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)


class NoSniff:
    """ASGI middleware: ``X-Content-Type-Options: nosniff`` on every HTTP answer that lacks it.

    Django's ``SecurityMiddleware`` sets it on what Django's views answer; the pages'
    static files are served by ``ASGIStaticFilesHandler`` in front of that chain, and
    a browser must not take one of them for a type other than the one it is sent as.
    """

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.application(scope, receive, send)
            return

        async def send_with_nosniff(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-content-type-options" for name, _ in headers):
                    headers.append((b"x-content-type-options", b"nosniff"))
                    message = {**message, "headers": headers}
            await send(message)

        await self.application(scope, receive, send_with_nosniff)


# How long the rest of a refused body is read and dropped before the connection
# is cut (a client that is still sending reads the 413 meanwhile).
DROP_REST_FOR_S = 5.0


class BodyTooLarge(Exception):
    """A request body went past the limit while it was being read."""


def too_large_response(path: str, max_bytes: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The 413 answer: the API's error format under ``/api/``, OpenAI's under ``/v1/``
    (the Responses API), a JSON-RPC error at ``/mcp``, plain text elsewhere."""
    message = "The request body is larger than AGENTSITE_MAX_BODY_BYTES allows."
    if path in ("/mcp", "/mcp/"):
        # -32600 Invalid Request: the message was not read, so it has no id to answer.
        error = {"code": -32600, "message": message, "data": {"max_bytes": max_bytes}}
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        content_type = b"application/json"
    elif path.startswith("/api/"):
        body = json.dumps(error_body("too_large", message, {"max_bytes": max_bytes})).encode()
        content_type = b"application/json"
    elif path.startswith("/v1/"):
        error = {"message": message, "type": "invalid_request_error", "param": None}
        body = json.dumps({"error": {**error, "code": "request_too_large"}}).encode()
        content_type = b"application/json"
    else:
        body = f"Request body larger than {max_bytes} bytes.\n".encode()
        content_type = b"text/plain; charset=utf-8"
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    return 413, headers, body


def declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyLimit:
    """ASGI middleware: a request body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is refused
    with 413 before it is buffered.

    A declared ``Content-Length`` over the limit is refused before the body is read;
    a body without one (chunked) is counted as it streams in and refused as soon as
    it passes the limit. Django itself would only refuse such a body once it held
    all of it.
    """

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        max_bytes = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if scope["type"] != "http" or max_bytes is None:
            await self.application(scope, receive, send)
            return
        declared = declared_length(scope.get("headers", []))
        if declared is not None and declared > max_bytes:
            await self.refuse(scope, send, max_bytes)
            return
        received = 0
        started = False

        async def counted_receive() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise BodyTooLarge
            return message

        async def watched_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.application(scope, counted_receive, watched_send)
        except BodyTooLarge:
            if not started:
                await self.refuse(scope, send, max_bytes)

    @staticmethod
    async def refuse(scope: dict[str, Any], send: Any, max_bytes: int) -> None:
        status, headers, body = too_large_response(scope.get("path", ""), max_bytes)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def daphne_body_limit() -> None:
    """Give daphne's HTTP request the same limit, refused as the headers arrive.

    Daphne reads a request's whole body (into a temporary file) before it calls
    the application, and then queues all of it for the application at once: by
    the time ``BodyLimit`` sees the first chunk, the web process holds the whole
    body in memory. So in a daphne process its request object refuses a body
    over the limit itself: from ``Content-Length`` as soon as the headers are in,
    or as a chunked body passes the limit. The 413 is written at once, the rest
    of the body is read and dropped for a moment (so that the client, still
    sending, gets to read the answer), and the connection is closed.
    """
    compat_daphne.limit_request_bodies(
        lambda: settings.DATA_UPLOAD_MAX_MEMORY_SIZE, too_large_response, DROP_REST_FOR_S
    )
