"""A name whose DNS answer changes between the address check and the connection.

Everything stays on loopback: 127.0.0.2 stands in for a public address (the
address rules are told to accept it), 127.0.0.1 is the internal service a
rebinding attacker aims at. Both listen on the same port, so a request that
resolves ``rebind.test`` a second time lands on the internal one.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jobs import addresses

NAME = "rebind.test"
STAND_IN_PUBLIC = "127.0.0.2"
INTERNAL = "127.0.0.1"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


class Recorder(ThreadingHTTPServer):
    """An HTTP server that records each request and answers it with a small page."""

    daemon_threads = True

    def __init__(self, host: str, port: int) -> None:
        self.seen: list[Seen] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                recorder.seen.append(Seen(self.command, self.path, dict(self.headers)))
                body = b"<title>seen</title>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__((host, port), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


@dataclass
class Rebinding:
    checked: Recorder
    internal: Recorder
    port: int
    # How many lookups get the stand-in public answer (the checks'); every later one
    # gets the internal address.
    checks: int = 1
    lookups: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{NAME}:{self.port}/hook"


def servers_on_one_port() -> tuple[Recorder, Recorder]:
    for _ in range(20):
        checked = Recorder(STAND_IN_PUBLIC, 0)
        try:
            return checked, Recorder(INTERNAL, checked.server_address[1])
        except OSError:  # the port is taken on 127.0.0.1: another one
            checked.stop()
    raise RuntimeError("no port free on both loopback addresses")


@pytest.fixture
def rebinding(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[Rebinding]:
    """``rebind.test`` answers the stand-in public address first, the internal one after."""
    settings.AGENTSITE_ALLOWED_PRIVATE_HOSTS = []
    checked, internal = servers_on_one_port()
    state = Rebinding(checked, internal, checked.server_address[1])
    real_getaddrinfo = socket.getaddrinfo
    real_is_global_unicast = addresses.is_global_unicast

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != NAME:
            return real_getaddrinfo(host, port, *args, **kwargs)
        answer = STAND_IN_PUBLIC if len(state.lookups) < state.checks else INTERNAL
        state.lookups.append(answer)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer, port))]

    def is_global_unicast(address: addresses.Address) -> bool:
        return address == ipaddress.ip_address(STAND_IN_PUBLIC) or real_is_global_unicast(address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(addresses, "is_global_unicast", is_global_unicast)
    yield state
    checked.stop()
    internal.stop()


@pytest.fixture
def proxy_from_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Proxy variables that point at a recorder: a proxy resolves names itself, past the
    address check, so nothing may go there."""
    proxy = Recorder(INTERNAL, 0)
    proxy_url = f"http://{INTERNAL}:{proxy.server_address[1]}"
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy_url)
    yield proxy
    proxy.stop()
