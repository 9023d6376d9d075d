"""An HTTP request's ASGI scope, as daphne builds it, for tests that call an application."""

from __future__ import annotations

from typing import Any


def http_scope(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    """A ``GET`` of ``path`` from a loopback client (``headers``: a host by default)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers if headers is not None else [(b"host", b"testserver")],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
