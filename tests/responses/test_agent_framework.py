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

from accounts.models import ApiToken
from responses.models import AgentResponse
from sessions.llm.scripted import scripted_push, scripted_requests
from tests.servers import client_venv

pytestmark = pytest.mark.django_db(transaction=True)

MAF_VERSION = os.environ.get("AGENTSITE_TEST_MAF_VERSION", "1.17.0")
# agent-framework-openai asks for agent-framework-core without an upper bound, and
# core 1.23 imports openai types that no released openai SDK has: pinned with it.
MAF_CORE_VERSION = os.environ.get("AGENTSITE_TEST_MAF_CORE_VERSION", "1.22.0")
SCRIPT = Path(__file__).with_name("maf_client.py")


def maf_python() -> Path:
    """The interpreter of a virtual environment holding agent-framework-openai."""
    return client_venv(
        f"maf-venv-{MAF_VERSION}-core-{MAF_CORE_VERSION}",
        f"agent-framework-openai=={MAF_VERSION}",
        f"agent-framework-core=={MAF_CORE_VERSION}",
    )


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


@pytest.mark.timeout(900)
def test_a_function_tool_of_its_own_round_trips(
    responses_url: str, rq_workers: Any, user: Any, client: Any
) -> None:
    """MAF runs the function the model calls and continues with previous_response_id and
    its function_call_output; no approval step is involved for a plain function tool."""
    python = maf_python()
    first = client.responses.create(model="scripted", input="hello")
    session_id = AgentResponse.objects.get(pk=first.id).session_id
    scripted_push(
        session_id,
        {"tool_calls": [{"id": "call_maf_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"text": "It is sunny in Paris."},
    )
    _, token = ApiToken.issue(user=user, name="maf")
    run = subprocess.run(
        [str(python), str(SCRIPT), responses_url, token, "tools", first.id],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen == {"calls": ["Paris"], "text": "It is sunny in Paris."}
    asked, answered = scripted_requests(session_id)[-2:]
    assert any(tool["name"] == "get_weather" for tool in asked["tools"])
    assert answered["messages"][-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "call_maf_1",
            "content": "sunny in Paris",
            "is_error": False,
        }
    ]
