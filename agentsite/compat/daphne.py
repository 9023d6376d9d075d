"""daphne's internals: the protocol behind its ``send``, and its HTTP request's body.

Verified against daphne 4.2.3 (on Twisted 26.10.0). Checked by
``tests/compat/test_daphne.py``.

- ``Server.create_application`` gives an application ``send`` as
  ``functools.partial(server.handle_reply, protocol)``: the protocol (a
  ``daphne.ws_protocol.WebSocketProtocol`` or a ``daphne.http_protocol.WebRequest``)
  is the partial's first argument.
- ``WebRequest`` is Twisted's ``http.Request``: ``gotLength(length)`` when the
  headers are in, ``handleContentChunk(data)`` per chunk of the body, ``process()``
  once it is whole; the request line's path is on ``request.channel._path``. Twisted
  parses a form body into ``args`` when ``_parsePOSTFormSubmission`` (its
  constructor's ``parsePOSTFormSubmission``) is true; daphne never reads ``args``.
  ``WebRequest.handle_reply`` writes an ``http.response.body`` message with
  ``http.Request.write`` (``WebRequest`` does not override ``write``) unless the
  request is finished or its channel gone; past the headers, a chunked
  ``Request.write`` adds the data's length to ``sentLength`` and writes
  ``toChunk(data)`` to its channel's transport.

Daphne is looked up in ``sys.modules``, never imported: importing it installs a
Twisted reactor, which a process served by anything else must not get from here.
"""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable
from typing import Any, cast

Headers = list[tuple[bytes, bytes]]
# (path, limit) -> (status, headers, body) of the refusal.
Refusal = Callable[[str, int], tuple[int, Headers, bytes]]


def protocol_behind(send: Any) -> Any:
    """The daphne protocol (a websocket or an HTTP request) behind ``send``, or None."""
    server = getattr(sys.modules.get("daphne.server"), "Server", None)
    if (
        server is not None
        and isinstance(send, functools.partial)
        and isinstance(getattr(send.func, "__self__", None), server)
        and send.args
    ):
        return send.args[0]
    return None


def websocket_protocol(send: Any) -> Any:
    """The daphne websocket protocol behind ``send`` (an autobahn protocol), or None."""
    protocol = protocol_behind(send)
    websocket = getattr(sys.modules.get("daphne.ws_protocol"), "WebSocketProtocol", None)
    return protocol if websocket is not None and isinstance(protocol, websocket) else None


def http_request(send: Any) -> Any:
    """The daphne HTTP request (a Twisted ``http.Request``) behind ``send``, or None."""
    request = getattr(sys.modules.get("daphne.http_protocol"), "WebRequest", None)
    protocol = protocol_behind(send)
    return protocol if request is not None and isinstance(protocol, request) else None


def write_body(
    request: Any, data: bytes, write_chunk: Callable[[bytes], None] | None = None
) -> bool:
    """What daphne does with an ``http.response.body`` message that has more to come
    (``WebRequest.handle_reply``): Twisted's ``Request.write``. False once the response
    is finished or its connection gone, when daphne would drop the message.

    ``write_chunk``: once the headers are out and the body is chunked, what
    ``Request.write`` would hand its channel's transport (``toChunk``: the length in hex,
    CRLF, the data, CRLF) goes to it instead, with the body's length counted as
    ``Request.write`` counts it. A request whose ``write`` was made to write nothing (a
    ``HEAD``, a status without a body) keeps its own.
    """
    if request.finished or request.channel is None:
        return False
    if (
        write_chunk is None
        or not data
        or not (request.startedWriting and request.chunked)
        or "write" in vars(request)
    ):
        request.write(data)  # WebRequest keeps Twisted's own
        return True
    request.sentLength += len(data)
    write_chunk(b"%x\r\n%b\r\n" % (len(data), data))
    return True


def limit_request_bodies(
    max_bytes: Callable[[], int | None], refusal: Refusal, drop_rest_for_s: float
) -> None:
    """Make daphne's HTTP request refuse a body over ``max_bytes()`` as it arrives, and
    leave its form parsing (which daphne does not use) to the application.

    From ``Content-Length`` as soon as the headers are in, or as a chunked body
    passes the limit: ``refusal``'s answer is written at once, the rest of the body
    is read and dropped for ``drop_rest_for_s`` (so that the client, still sending,
    gets to read the answer), and the connection is closed. Idempotent; does
    nothing in a process without daphne.
    """
    http_protocol = sys.modules.get("daphne.http_protocol")
    request_class: Any = getattr(http_protocol, "WebRequest", None)
    if request_class is None or getattr(request_class, "agentsite_body_limit", False):
        return
    got_length = request_class.gotLength
    handle_chunk = request_class.handleContentChunk
    process = request_class.process

    def refuse(request: Any, limit: int) -> None:
        request.agentsite_refused = True
        path = bytes(getattr(request.channel, "_path", b"")).decode("latin-1")
        status, headers, body = refusal(path.split("?", 1)[0], limit)
        lines = [b"HTTP/1.1 %d Request Entity Too Large" % status]
        lines += [name + b": " + value for name, value in headers]
        transport = request.channel.transport
        transport.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        if hasattr(transport, "loseWriteConnection"):
            transport.loseWriteConnection()
        # Imported here, not at the top: importing twisted's reactor installs one, and
        # only daphne may choose which (this module is also imported without daphne).
        from twisted.internet import reactor

        cast(Any, reactor).callLater(drop_rest_for_s, transport.abortConnection)

    def limited_got_length(request: Any, length: int | None) -> None:
        # Twisted parses a POST's Content-Type with the email package (about 50 µs) to
        # fill ``request.args`` from a form; daphne hands the raw body to the application
        # and never reads ``args``. Twisted's constructor takes this flag; daphne's
        # request factory does not pass it.
        request._parsePOSTFormSubmission = False
        request.agentsite_received = 0
        request.agentsite_refused = False
        limit = max_bytes()
        if length is not None and limit is not None and length > limit:
            request.content = io.BytesIO()
            refuse(request, limit)
            return
        got_length(request, length)

    def limited_handle_chunk(request: Any, data: bytes) -> None:
        if request.agentsite_refused:
            return
        request.agentsite_received += len(data)
        limit = max_bytes()
        if limit is not None and request.agentsite_received > limit:
            request.content.close()
            request.content = io.BytesIO()
            refuse(request, limit)
            return
        handle_chunk(request, data)

    def limited_process(request: Any) -> Any:
        if getattr(request, "agentsite_refused", False):
            request.channel.transport.abortConnection()  # answered already
            return None
        return process(request)

    request_class.gotLength = limited_got_length
    request_class.handleContentChunk = limited_handle_chunk
    request_class.process = limited_process
    request_class.agentsite_body_limit = True
