"""A worker process loads the domain only; the API docs are served from local files."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from django.contrib.staticfiles import finders

# What a tool worker and a turn worker import: Django's set-up plus their RQ entry points.
WORKER_IMPORTS = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
import django
django.setup()
import jobs.tasks, jobs.worker, sessions.tasks, sessions.worker, agentsite.cron
http = sorted(
    name for name in sys.modules
    if name.split(".")[0] in ("ninja", "daphne", "a2a", "starlette")
    or name in ("agentsite.api", "agentsite.web.auth", "agentsite.web.http", "agentsite.urls")
    or name == "accounts.api_tokens"
    or name.startswith(("jobs.api", "sessions.api", "sessions.approvals_api", "jobs.mcp"))
    or name.startswith("sessions.sse")
    or name in ("sessions.consumers", "sessions.views", "jobs.views", "responses.api")
    or name in ("a2a_api.app", "a2a_api.handler", "a2a_api.mapping", "a2a_api.notify")
)
print(json.dumps(http))
"""


def test_a_worker_process_imports_no_http_module() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WORKER_IMPORTS], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


@pytest.mark.django_db
def test_the_api_docs_page_uses_the_apps_own_static_files(client: Any) -> None:
    page = client.get("/api/docs")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower()
    assert finders.find("ninja/swagger-ui-bundle.js")  # what the web process serves at /static/
