"""A websocket follower light enough to hold thousands of in one benchmark process.

The ``websockets`` client costs so much CPU per frame (docs/benchmarks.md,
"Streams") that at 5,000 followers it would measure the benchmark rather than
the server. This one speaks
just enough of RFC 6455 to follow a stream: the opening handshake, unmasked
server frames, pongs to the server's pings, and a close. For each text frame
it records when the frame arrived and the ``"t"`` timestamp the publisher put
in it, found without decoding the JSON.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from dataclasses import dataclass, field

T_MARK = b'"t":'


@dataclass
class Follower(asyncio.Protocol):
    host: str
    port: int
    path: str
    headers: dict[str, str]
    opened: asyncio.Future[None] = field(init=False)
    closed: asyncio.Future[int] = field(init=False)
    # (arrival time, publisher's "t") for every text frame that carried one.
    arrivals: list[tuple[float, float]] = field(default_factory=list)
    frames: int = 0

    def __post_init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.opened = loop.create_future()
        self.closed = loop.create_future()
        self.buffer = bytearray()
        self.handshaken = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            f"Origin: http://{self.host}:{self.port}",
            *(f"{name}: {value}" for name, value in self.headers.items()),
        ]
        transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin1"))

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self.buffer += data
        if not self.handshaken:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(self.buffer[: self.buffer.find(b"\r\n")])
            del self.buffer[: end + 4]
            if b" 101 " not in status:
                self.fail(ConnectionError(status.decode("latin1")))
                return
            self.handshaken = True
            self.opened.set_result(None)
        self.frames_parse(now)

    def frames_parse(self, now: float) -> None:
        buf = self.buffer
        while len(buf) >= 2:
            opcode, length, start = buf[0] & 0x0F, buf[1] & 0x7F, 2
            if length == 126:
                if len(buf) < 4:
                    return
                length, start = int.from_bytes(buf[2:4], "big"), 4
            elif length == 127:
                if len(buf) < 10:
                    return
                length, start = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < start + length:
                return
            if opcode == 0x1:
                self.frames += 1
                at = buf.find(T_MARK, start, start + length)
                if at >= 0:
                    stop = at + len(T_MARK)
                    while buf[stop] in b"0123456789.e-+ ":
                        stop += 1
                    self.arrivals.append((now, float(buf[at + len(T_MARK) : stop])))
            elif opcode == 0x9 and self.transport is not None:
                # A ping: answer it, as every client does (daphne closes a socket whose
                # pongs stop coming, ``--ping-timeout``), masked, with its payload.
                payload = bytes(buf[start : start + length])
                mask = os.urandom(4)
                masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                self.transport.write(bytes([0x8A, 0x80 | len(payload)]) + mask + masked)
            elif opcode == 0x8:
                code = int.from_bytes(buf[start : start + 2], "big") if length >= 2 else 1005
                self.fail(ConnectionError(f"closed by the server with {code}"), code)
            del buf[: start + length]

    def fail(self, exc: Exception, code: int = 1006) -> None:
        if not self.opened.done():
            self.opened.set_exception(exc)
        if not self.closed.done():
            self.closed.set_result(code)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(ConnectionError("connection lost"))

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            # A masked close frame with code 1000 (clients must mask what they send).
            mask = os.urandom(4)
            body = bytes(b ^ mask[i % 4] for i, b in enumerate((1000).to_bytes(2, "big")))
            self.transport.write(bytes([0x88, 0x80 | 2]) + mask + body)
            self.transport.close()


async def follow(
    host: str, port: int, path: str, headers: dict[str, str], timeout: float = 60
) -> Follower:
    """An open follower, or the exception that kept it from opening."""
    loop = asyncio.get_running_loop()
    follower = Follower(host, port, path, headers)
    await loop.create_connection(lambda: follower, host, port)
    await asyncio.wait_for(follower.opened, timeout)
    return follower
