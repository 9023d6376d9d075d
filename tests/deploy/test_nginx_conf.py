"""The shipped nginx configuration agrees with the app's settings.

``make hosts`` runs the file itself in front of two web hosts (tests/hosts/); this
holds what needs no hosts.
"""

from __future__ import annotations

import re

from django.conf import settings

from tests.conftest import BASE_DIR

CONF = (BASE_DIR / "deploy" / "nginx" / "agentsite.conf").read_text()
UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}


def directive(name: str) -> list[str]:
    return re.findall(rf"^\s*{name}\s+([^;]+);", CONF, flags=re.MULTILINE)


def test_the_proxy_refuses_the_bodies_the_app_refuses() -> None:
    (size,) = directive("client_max_body_size")
    found = re.fullmatch(r"(\d+)([km]?)", size.strip().lower())
    assert found, size
    assert int(found[1]) * UNITS[found[2]] == settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def test_websockets_are_upgraded_and_event_streams_go_out_unbuffered() -> None:
    assert directive("proxy_set_header Upgrade") == ["$http_upgrade"]
    assert directive("proxy_set_header Connection") == ["$connection_upgrade"]
    assert directive("proxy_set_header X-Forwarded-Proto") == ["$scheme"]
    assert directive("proxy_buffering") == ["off", "off"]
