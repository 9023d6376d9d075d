"""autobahn's websocket protocol state, read to write frames past it.

Verified against autobahn 26.11.1. Checked by ``tests/compat/test_autobahn.py``.

``WebSocketProtocol.state`` is ``STATE_OPEN`` once the handshake is done;
``_perMessageCompress`` is None unless permessage-deflate was negotiated;
``send_queue`` holds frames autobahn has not yet handed to the transport.
"""

from __future__ import annotations

from typing import Any

from autobahn.websocket.protocol import WebSocketProtocol


def open_and_idle(protocol: Any) -> bool:
    """Whether an unframed write may go to ``protocol``'s transport now: open, no
    compression negotiated, nothing queued in autobahn before it."""
    return bool(
        protocol.state == WebSocketProtocol.STATE_OPEN
        and protocol._perMessageCompress is None
        and not protocol.send_queue
    )
