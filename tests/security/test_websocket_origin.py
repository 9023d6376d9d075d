"""A browser's websocket handshake must come from the site's own origin: scheme, host and port.

A real daphne and a real websocket client sending a login cookie with each
``Origin``: a page on another port or scheme of the same host is another site.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as websocket_connect
from websockets.typing import Origin

from sessions.models import AgentSession
from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_running

pytestmark = pytest.mark.django_db(transaction=True)

TRUSTED = "https://chat.example.com"


@pytest.fixture(scope="module")
def site(processes: Processes) -> Iterator[str]:
    with daphne_running(processes, "daphne-origin", env={"CSRF_TRUSTED_ORIGINS": TRUSTED}) as url:
        yield url


def login_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def handshake(site: str, user: Any, origin: str) -> int:
    """The status of a cookie-carrying handshake for one of ``user``'s sessions from ``origin``."""
    session = AgentSession.objects.create(owner=user)
    url = site.replace("http://", "ws://") + f"/ws/sessions/{session.id}/"
    try:
        with websocket_connect(
            url,
            origin=Origin(origin),
            additional_headers={"Cookie": login_cookie(user)},
            open_timeout=10,
        ) as socket:
            # A socket whose login was not accepted is closed at once (4401); this one
            # stays open, waiting for the empty session's first event.
            with pytest.raises(TimeoutError):
                socket.recv(timeout=2)
            return 101
    except InvalidStatus as refused:
        return int(refused.response.status_code)


def test_the_sites_own_origin_connects_with_the_cookie(site: str, user: Any) -> None:
    assert handshake(site, user, site) == 101


@pytest.mark.parametrize(
    "other",
    [
        lambda site: site.rsplit(":", 1)[0] + ":1",  # same host, another port
        lambda site: site.replace("http://", "https://"),  # same host and port, another scheme
        lambda site: site.rsplit(":", 1)[0],  # the default port
        lambda site: site.replace("127.0.0.1", "localhost"),  # an allowed name, not this one
        lambda site: "https://evil.example",
        lambda site: "null",  # sandboxed frames and file: pages
    ],
    ids=["other-port", "other-scheme", "default-port", "other-allowed-host", "other-site", "null"],
)
def test_another_origin_is_refused_even_with_the_cookie(site: str, user: Any, other: Any) -> None:
    assert handshake(site, user, other(site)) == 403


def test_an_origin_in_csrf_trusted_origins_connects(site: str, user: Any) -> None:
    assert handshake(site, user, TRUSTED) == 101
    assert handshake(site, user, TRUSTED.replace("https", "http")) == 403
