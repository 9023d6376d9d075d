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

import functools
import sys
from typing import Any

from autobahn.websocket.protocol import WebSocketProtocol as AutobahnProtocol
from twisted.internet import tcp

OPCODE_TEXT_FIN = 0x81
SCOPE_KEY = "agentsite.wire"


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
        """The wire under ``send`` (the ``send`` daphne gave the application), if it is daphne's.

        Daphne is looked up, not imported: importing it installs a Twisted reactor,
        which a process served by anything else must not get from agentsite.
        """
        server = getattr(sys.modules.get("daphne.server"), "Server", None)
        protocol = getattr(sys.modules.get("daphne.ws_protocol"), "WebSocketProtocol", None)
        if (
            server is not None
            and protocol is not None
            and isinstance(send, functools.partial)
            and isinstance(getattr(send.func, "__self__", None), server)
            and send.args
            and isinstance(send.args[0], protocol)
        ):
            return cls(send.args[0])
        return None

    def ready(self) -> bool:
        """Whether a frame may be written now: open, uncompressed, nothing queued before it,
        on a plain TCP socket (a TLS connection's bytes must pass its TLS layer)."""
        protocol = self.protocol
        return (
            protocol.state == AutobahnProtocol.STATE_OPEN
            and protocol._perMessageCompress is None
            and not protocol.send_queue
            and isinstance(protocol.transport, tcp.Connection)
            and protocol.transport.TLS is False
        )

    def unsent(self) -> int:
        """Bytes written to this socket that the client has not taken yet (Twisted's buffer)."""
        transport = self.protocol.transport
        return int(len(transport.dataBuffer) - transport.offset + transport._tempDataLen)

    def write(self, frame: bytes) -> None:
        """Write ``frame`` (``text_frame``'s bytes); call only while ``ready()``.

        With Twisted's buffer empty the frame goes out in one ``send`` now; what
        the socket does not take (or everything, with data already waiting) is
        left to Twisted, behind the waiting data.
        """
        transport = self.protocol.transport
        sent = 0
        if (
            not transport.dataBuffer
            and not transport._tempDataBuffer
            and transport.connected
            and not transport._writeDisconnected
        ):
            try:
                sent = transport.socket.send(frame)
            except OSError:
                # Would block, or the connection is gone: Twisted's own write finds
                # out which, and reports a lost connection as it always does.
                sent = 0
        if sent < len(frame):
            transport.write(frame[sent:] if sent else frame)


class WireInScope:
    """ASGI middleware, outermost: the daphne connection under ``SCOPE_KEY`` in the scope."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        wire = Wire.of(send)
        if wire is not None:
            # In place: daphne, the only caller, never reads the scope again, and a
            # copy per socket would cost more than the wire saves in memory.
            scope[SCOPE_KEY] = wire
        await self.app(scope, receive, send)


def wire_of(scope: dict[str, Any]) -> Wire | None:
    """The connection ``WireInScope`` found for this socket, if daphne serves it."""
    wire: Wire | None = scope.get(SCOPE_KEY)
    return wire


# A frame is built once per text: every local follower of a session is sent the same
# text object (``sessions.streams.frame_json``), so the lookup hashes it once.
text_frame_once = functools.lru_cache(maxsize=4096)(text_frame)
