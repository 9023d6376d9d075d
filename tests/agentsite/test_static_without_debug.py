"""With DEBUG off (the default) the web server still serves the pages' static files."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_running

pytestmark = pytest.mark.django_db(transaction=True)


def test_daphne_serves_static_files_with_debug_off(processes: Processes) -> None:
    with daphne_running(processes, "daphne-static", env={"DEBUG": "false"}) as base:
        script = httpx.get(f"{base}/static/js/chat.js", timeout=30)
        missing = httpx.get(f"{base}/api/no-such-thing", timeout=30)

    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert script.headers["x-content-type-options"] == "nosniff"
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert "Traceback" not in missing.text
