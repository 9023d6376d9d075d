"""An MCP client's GET stream (server-to-client messages) is open as soon as it asks.

The stream's first bytes may be long in coming: no message waits, and the SDK's
keep-alive comment comes after 15 s. A client that waits for the response's
status and headers before it goes on must not wait for them.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

pytestmark = pytest.mark.django_db(transaction=True)

# Below the SDK's 15 s keep-alive: headers that waited for it miss this bound.
HEADERS_WITHIN_S = 10.0
VERSION = "2025-06-18"


def opened_session(mcp_url: str, raw: str) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {raw}", "Accept": "application/json, text/event-stream"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "get-stream-test", "version": "1"},
        },
    }
    response = httpx.post(mcp_url, json=hello, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    headers["mcp-session-id"] = response.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = VERSION
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = httpx.post(mcp_url, json=ready, headers=headers, timeout=10)
    assert response.status_code == 202, response.text
    return headers


def test_the_get_stream_answers_with_its_headers_before_any_message(
    mcp_url: str, token_for: Callable[[Any], str], user: Any
) -> None:
    headers = opened_session(mcp_url, token_for(user))
    url = urlsplit(mcp_url)
    request = [f"GET {url.path} HTTP/1.1", f"Host: {url.netloc}", "Accept: text/event-stream"]
    request += [f"{name}: {value}" for name, value in headers.items() if name != "Accept"]
    with socket.create_connection((url.hostname, url.port), timeout=HEADERS_WITHIN_S) as conn:
        conn.sendall(("\r\n".join(request) + "\r\n\r\n").encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = conn.recv(4096)  # socket.timeout here: the headers waited for a message
            assert chunk, received
            received += chunk
    head = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    assert head.startswith("http/1.1 200"), head
    assert "content-type: text/event-stream" in head, head
