"""agentsite.compat.autobahn: what it reads of autobahn's protocol is still there."""

from __future__ import annotations

from autobahn.websocket.protocol import WebSocketProtocol
from daphne.ws_protocol import WebSocketProtocol as DaphneWebSocket

from agentsite.compat import autobahn
from tests.compat.internals import assigned_attributes


def test_the_protocol_state_it_reads_is_still_kept() -> None:
    assert {"state", "_perMessageCompress", "send_queue"} <= assigned_attributes(DaphneWebSocket)
    assert WebSocketProtocol.STATE_OPEN != WebSocketProtocol.STATE_CLOSING


def test_only_an_open_uncompressed_idle_protocol_is_written_past() -> None:
    protocol = DaphneWebSocket()
    protocol.state = WebSocketProtocol.STATE_OPEN
    protocol._perMessageCompress = None
    protocol.send_queue = []
    assert autobahn.open_and_idle(protocol)
    protocol.send_queue.append(b"queued")
    assert not autobahn.open_and_idle(protocol)
    protocol.send_queue.clear()
    protocol.state = WebSocketProtocol.STATE_CLOSING
    assert not autobahn.open_and_idle(protocol)
