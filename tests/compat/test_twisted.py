"""agentsite.compat.twisted on a real Twisted TCP connection (over a socket pair, on a
reactor of its own that is never installed nor run)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from twisted.internet import tcp
from twisted.internet.protocol import Protocol
from twisted.internet.selectreactor import SelectReactor

from agentsite.compat import twisted


@pytest.fixture
def pair() -> Iterator[tuple[tcp.Connection, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    protocol: Any = Protocol()  # an IProtocol, by zope.interface declaration
    connection = tcp.Connection(ours, protocol, SelectReactor())
    connection.connected = 1  # as a listening port leaves a connection it accepts
    yield connection, theirs
    ours.close()
    theirs.close()


def test_a_tcp_connection_is_plain_until_tls_starts(
    pair: tuple[tcp.Connection, socket.socket],
) -> None:
    connection, _ = pair
    assert twisted.is_plain_tcp(connection)
    connection.TLS = True
    assert not twisted.is_plain_tcp(connection)
    assert not twisted.is_plain_tcp(object())


def test_write_now_sends_at_once_with_nothing_waiting(
    pair: tuple[tcp.Connection, socket.socket],
) -> None:
    connection, theirs = pair
    twisted.write_now(connection, b"frame")
    assert theirs.recv(100) == b"frame"
    assert twisted.unsent(connection) == 0


def test_write_now_queues_behind_what_twisted_holds_and_unsent_counts_it(
    pair: tuple[tcp.Connection, socket.socket],
) -> None:
    connection, theirs = pair
    connection.write(b"first")  # Twisted holds it until its loop turns
    assert twisted.unsent(connection) == 5
    twisted.write_now(connection, b"second")
    assert twisted.unsent(connection) == 11
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(100)
    connection.doWrite()  # the loop's turn: in order
    assert theirs.recv(100) == b"firstsecond"
    assert twisted.unsent(connection) == 0
