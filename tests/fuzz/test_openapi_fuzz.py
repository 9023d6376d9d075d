"""Property-based fuzz of the REST API against its own OpenAPI document.

Schemathesis reads ``/api/openapi.json`` from a real web server (daphne) with a
real tool worker and turn worker behind it, generates requests from every
operation's schema (valid ones and ones that break it), follows the documented
links from created jobs, sessions and runs to the operations on them, and
checks each answer: no server error, a documented status code, content type and
headers, and a body (each event, for the streams) that matches the documented
schema; also that a request without the token does not succeed, a missing
required header is refused and an undocumented method is 405. The run is
derandomized (``schemathesis.toml``), so it sends the same requests every time.

``make test`` skips this module (marker ``fuzz``); ``make fuzz`` runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from accounts.models import ApiToken
from sessions.worker import TURN_WORKER_ARGS
from tests.conftest import ARTIFACTS, Processes, wait_for_workers
from tests.sessions.test_stream_clients import daphne_serve

pytestmark = [pytest.mark.fuzz, pytest.mark.django_db(transaction=True)]

CONFIG = Path(__file__).with_name("schemathesis.toml")
# The fuzz stops itself well before this; the margin covers a slow machine.
FUZZ_TIMEOUT_S = 900


def small_workspace(root: Path) -> Path:
    """A workspace with one quick test, so the run_tests jobs the fuzz starts stay cheap."""
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_one.py").write_text("def test_one():\n    assert True\n")
    return root


def schemathesis_run(base: str, token: str, report: Path) -> subprocess.CompletedProcess[str]:
    st = Path(sys.executable).with_name("st")
    return subprocess.run(
        [
            str(st),
            "--config-file",
            str(CONFIG),
            "run",
            f"{base}/api/openapi.json",
            "--no-color",
            "--report",
            "json",
            "--report-json-path",
            str(report),
        ],
        env={**os.environ, "AGENTSITE_FUZZ_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=FUZZ_TIMEOUT_S,
    )


@pytest.mark.timeout(FUZZ_TIMEOUT_S + 60)
def test_the_api_answers_as_its_openapi_document_says(
    processes: Processes, user: Any, tmp_path: Path
) -> None:
    env = {
        "AGENTSITE_WORKSPACE": str(small_workspace(tmp_path / "workspace")),
        # The API as shipped: without the tools the other tests register.
        "AGENTSITE_EXTRA_TOOLS": "",
    }
    base = daphne_serve(processes, "fuzz-web", env=env)
    processes.start("fuzz-tools", "rqworker", "tools", "default", env=env)
    processes.start("fuzz-turns", *TURN_WORKER_ARGS, env=env)
    wait_for_workers("tools", 1)
    wait_for_workers("turns", 1)
    _, token = ApiToken.issue(user=user, name="fuzz")
    report_path = ARTIFACTS / "fuzz-report.json"
    web_log = ARTIFACTS / "fuzz-web.log"
    log_start = web_log.stat().st_size

    started = time.monotonic()
    result = schemathesis_run(base, token, report_path)
    elapsed = time.monotonic() - started

    (ARTIFACTS / "fuzz-output.txt").write_text(result.stdout + result.stderr)
    report = json.loads(report_path.read_text())
    cases = report["test_cases"]
    with web_log.open("rb") as log:
        log.seek(log_start)
        requests = sum(1 for line in log if b"django.channels.server: HTTP " in line)
    print(
        f"\nfuzz: {cases['generated']} test cases, {requests} requests answered, on "
        f"{report['operations']['tested']} operations in {elapsed:.0f} s; "
        f"{cases['with_failures']} with failures (output in {ARTIFACTS / 'fuzz-output.txt'})"
    )
    assert result.returncode == 0, result.stdout[-20_000:] + result.stderr[-5_000:]
    assert report["operations"]["tested"] == report["operations"]["total"] > 0
    assert cases["generated"] > 0
