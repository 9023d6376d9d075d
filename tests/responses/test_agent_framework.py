"""Microsoft Agent Framework's OpenAI Responses client drives agentsite's agents.

MAF lives in a virtual environment of its own (its dependencies are not the
app's), created on first use from PyPI and cached under .agentsite/ by version.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentsite.models import ApiToken
from tests.servers import client_venv

pytestmark = pytest.mark.django_db(transaction=True)

MAF_VERSION = os.environ.get("AGENTSITE_TEST_MAF_VERSION", "1.17.0")
SCRIPT = Path(__file__).with_name("maf_client.py")


def maf_python() -> Path:
    """The interpreter of a virtual environment holding agent-framework-openai."""
    return client_venv(f"maf-venv-{MAF_VERSION}", f"agent-framework-openai=={MAF_VERSION}")


@pytest.mark.timeout(900)
def test_background_runs_and_a_resumed_stream(
    responses_url: str, rq_workers: Any, user: Any
) -> None:
    python = maf_python()
    _, token = ApiToken.issue(user=user, name="maf")
    run = subprocess.run(
        [str(python), str(SCRIPT), responses_url, token],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["first_token"] and seen["polls"] > 0
    assert "The tests finished: 31 passed, 2 failed" in seen["background_text"]
    # MAF resumes a stream by retrieving it again from the start (no starting_after):
    # the replay carries the whole text, the part it had seen first.
    assert seen["stream_before"]
    streamed = "".join(seen["stream_after"])
    assert streamed.startswith("".join(seen["stream_before"]))
    assert "The tests finished: 31 passed, 2 failed" in streamed
