"""Websocket text frames written straight to daphne's transport.

A session's event goes to every local follower as the same text. Sent through
ASGI, each copy costs per follower: Channels' ``send``, daphne's reply
handling, autobahn's framing (which formats its debug log line whether or not
it is written) and Twisted's ``write``, which registers the socket for writing
and sends on a later turn of the loop: two ``epoll_ctl`` calls besides the
``send``. Here a frame is built once per text (RFC 6455: FIN, text opcode,
unmasked as a server's frames are, no extension) and written to each socket
with one ``send`` when nothing waits before it in Twisted's buffer.

``WireInScope``, outermost in the websocket stack, finds the connection behind
daphne's ``send`` and leaves it in the scope (``wire_of(scope)``). Only a
daphne websocket that is open, without permessage-deflate and with nothing
queued in autobahn, is written to directly. For anything else (another ASGI
server, Channels' test communicator) there is no wire and the ASGI ``send``
stays the way out. Both ways end in the same Twisted transport, in call
order, so a socket may use both. A frame written directly passes no ASGI
middleware: none in agentsite's websocket stack looks at data frames.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, Protocol

from agentsite.compat import autobahn, daphne, twisted

OPCODE_TEXT_FIN = 0x81
SCOPE_KEY = "agentsite.wire"
RESPONSE_SCOPE_KEY = "agentsite.response_wire"


def text_frame(text: str) -> bytes:
    """``text`` as one unmasked, unfragmented websocket text frame."""
    payload = text.encode()
    length = len(payload)
    if length < 126:
        header = bytes((OPCODE_TEXT_FIN, length))
    elif length < 1 << 16:
        header = bytes((OPCODE_TEXT_FIN, 126)) + length.to_bytes(2, "big")
    else:
        header = bytes((OPCODE_TEXT_FIN, 127)) + length.to_bytes(8, "big")
    return header + payload


class Wire:
    """The daphne connection behind a websocket consumer's ASGI ``send``."""

    __slots__ = ("protocol",)

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol

    @classmethod
    def of(cls, send: Any) -> Wire | None:
        """The wire under ``send`` (the ``send`` daphne gave the application), if it is daphne's."""
        protocol = daphne.websocket_protocol(send)
        return cls(protocol) if protocol is not None else None

    def ready(self) -> bool:
        """Whether a frame may be written now: open, uncompressed, nothing queued before it,
        on a plain TCP socket (a TLS connection's bytes must pass its TLS layer)."""
        return autobahn.open_and_idle(self.protocol) and twisted.is_plain_tcp(
            self.protocol.transport
        )

    def unsent(self) -> int:
        """Bytes written to this socket that the client has not taken yet (Twisted's buffer)."""
        return twisted.unsent(self.protocol.transport)

    def write(self, frame: bytes) -> None:
        """Write ``frame`` (``text_frame``'s bytes); call only while ``ready()``.

        With Twisted's buffer empty the frame goes out in one ``send`` now; what
        the socket does not take (or everything, with data already waiting) is
        left to Twisted, behind the waiting data.
        """
        twisted.write_now(self.protocol.transport, frame)


class ResponseWire:
    """The TCP connection under a daphne HTTP response, for a long response (a stream) to
    see how much of what it wrote the client has not taken, to write its body straight
    to daphne's request, and to drop the client."""

    __slots__ = ("request", "transport")

    def __init__(self, request: Any, transport: Any) -> None:
        self.request = request
        self.transport = transport

    @classmethod
    def of(cls, send: Any) -> ResponseWire | None:
        request = daphne.http_request(send)
        transport = None if request is None else getattr(request.channel, "transport", None)
        return cls(request, transport) if twisted.is_plain_tcp(transport) else None

    def unsent(self) -> int:
        return twisted.unsent(self.transport)

    def write(self, data: bytes) -> bool:
        """Write ``data`` as the response body's next part, as daphne writes an
        ``http.response.body`` message with more to come, but without the ASGI ``send``:
        no middleware's wrapper, no Django response loop, no daphne dispatch for each
        event of a stream. Call it only once the response has started (its first part
        sent through ASGI). False once the response is over."""
        return daphne.write_body(self.request, data, self._write_chunk)

    def _write_chunk(self, chunk: bytes) -> None:
        # As a websocket frame is written (``Wire.write``): one ``send`` now when nothing
        # waits in Twisted's buffer, where Twisted's own write registers the socket for
        # writing and sends on a later turn of the loop.
        twisted.write_now(self.transport, chunk)

    def drop(self) -> None:
        """Close the connection now, discarding what it still holds for the client."""
        self.transport.abortConnection()


class Unsent(Protocol):
    def unsent(self) -> int: ...


# How often a stream waiting for its client to read looks again.
DRAIN_POLL_S = 0.05


async def drained(wire: Unsent, limit: int, stall_s: float) -> bool:
    """Wait until at most ``limit`` bytes wait for the client; False if that takes more
    than ``stall_s`` (the client has stopped reading).

    Writing to a socket never waits for its reader, so a stream that keeps writing
    for a client that does not read fills the web process's memory. A stream waits
    here before each write instead: a slow reader slows its own stream (a long
    replay included), and a stalled one is found out and cut off.
    """
    if wire.unsent() <= limit:
        return True
    deadline = time.monotonic() + stall_s
    while wire.unsent() > limit:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(DRAIN_POLL_S)
    return True


async def written_when_drained(wire: ResponseWire, data: bytes, limit: int, stall_s: float) -> bool:
    """Write ``data`` to a stream's response once at most ``limit`` bytes wait for the
    client (``drained``); False when the stream is over: its client stalled (it is
    dropped) or the response has ended."""
    if not await drained(wire, limit, stall_s):
        wire.drop()
        return False
    return wire.write(data)


class WireInScope:
    """ASGI middleware, outermost: the daphne connection in the scope, a websocket's
    ``Wire`` under ``SCOPE_KEY`` and an HTTP response's ``ResponseWire`` under
    ``RESPONSE_SCOPE_KEY``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # In place: daphne, the only caller, never reads the scope again, and a copy
        # per connection would cost more than the wire saves in memory.
        if scope["type"] == "websocket":
            wire = Wire.of(send)
            if wire is not None:
                scope[SCOPE_KEY] = wire
        elif scope["type"] == "http":
            response = ResponseWire.of(send)
            if response is not None:
                scope[RESPONSE_SCOPE_KEY] = response
        await self.app(scope, receive, send)


def wire_of(scope: dict[str, Any]) -> Wire | None:
    """The connection ``WireInScope`` found for this socket, if daphne serves it."""
    wire: Wire | None = scope.get(SCOPE_KEY)
    return wire


def response_wire_of(scope: dict[str, Any]) -> ResponseWire | None:
    """The connection under this HTTP response, if daphne serves it over plain TCP."""
    wire: ResponseWire | None = scope.get(RESPONSE_SCOPE_KEY)
    return wire


# A frame is built once per text: every local follower of a session is sent the same
# text object (``sessions.streams.frame_json``), so the lookup hashes it once.
text_frame_once = functools.lru_cache(maxsize=4096)(text_frame)
