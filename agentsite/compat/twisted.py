"""Twisted's TCP transport, written to and measured directly.

Verified against Twisted 26.10.0. Checked by ``tests/compat/test_twisted.py``.

A ``twisted.internet.tcp.Connection`` (``abstract.FileDescriptor``) keeps what it
has not sent in ``dataBuffer`` (sent up to ``offset``) and, written since the
last flush, in ``_tempDataBuffer`` (``_tempDataLen`` bytes); ``connected`` and
``_writeDisconnected`` say whether it may still write; ``socket`` is the socket;
``TLS`` is true once TLS is started on it.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import tcp


def is_plain_tcp(transport: Any) -> bool:
    """Whether ``transport`` is a TCP connection without TLS (its bytes go to the socket)."""
    return isinstance(transport, tcp.Connection) and transport.TLS is False


def unsent(transport: Any) -> int:
    """Bytes a Twisted TCP transport holds that its peer has not taken yet."""
    return int(len(transport.dataBuffer) - transport.offset + transport._tempDataLen)


def write_now(transport: Any, data: bytes) -> None:
    """Write ``data``: with the transport's buffer empty in one ``send`` now, and what
    the socket does not take (or everything, with data already waiting) through
    Twisted's ``write``, behind the waiting data."""
    sent = 0
    if (
        not transport.dataBuffer
        and not transport._tempDataBuffer
        and transport.connected
        and not transport._writeDisconnected
    ):
        try:
            sent = transport.socket.send(data)
        except OSError:
            # Would block, or the connection is gone: Twisted's own write finds
            # out which, and reports a lost connection as it always does.
            sent = 0
    if sent < len(data):
        transport.write(data[sent:] if sent else data)
