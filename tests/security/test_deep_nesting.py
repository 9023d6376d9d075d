"""A JSON body nested hundreds of levels deep is refused with a clear 400 and one log line.

A small body (a couple of kilobytes) can nest deeper than any recursive walk of it
survives; the depth is bounded before anything walks it. Nesting up to the bound
reaches the usual checks.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from accounts.models import ApiToken
from agentsite.web.http import MAX_JSON_DEPTH
from jobs.models import Job
from sessions.models import AgentSession
from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_serve


def nested(depth: int) -> Any:
    """Lists inside lists: ``depth`` levels counting the outermost."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def nested_text(depth: int) -> str:
    """The JSON text of ``nested(depth)``, written out: encoding so deep a value would
    overflow the test's own stack first."""
    return "[" * depth + "]" * depth


def depth_of(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def refusals_logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "nested deeper" in r.getMessage()]


@pytest.mark.django_db
@pytest.mark.parametrize("depth", [600, 950, MAX_JSON_DEPTH + 1])
def test_a_deeply_nested_session_body_is_refused_with_one_log_line(
    api_client: Any, caplog: pytest.LogCaptureFixture, depth: int
) -> None:
    body = f'{{"title": "deep", "notes": {nested_text(depth - 1)}}}'

    with caplog.at_level(logging.INFO):
        response = api_client.post("/api/sessions", body, content_type="application/json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "nested_too_deep"
    assert str(MAX_JSON_DEPTH) in error["message"]
    assert len(refusals_logged(caplog)) == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not AgentSession.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("depth", [600, 950])
def test_a_deeply_nested_job_body_is_refused_with_one_log_line(
    api_client: Any, caplog: pytest.LogCaptureFixture, depth: int
) -> None:
    body = f'{{"tool": "sleepy", "args": {{"seconds": {nested_text(depth - 2)}}}}}'

    with caplog.at_level(logging.INFO):
        response = api_client.post(
            "/api/jobs", body, content_type="application/json", headers={"Idempotency-Key": "k"}
        )

    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "nested_too_deep"
    assert len(refusals_logged(caplog)) == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_nesting_up_to_the_bound_reaches_the_usual_checks(api_client: Any) -> None:
    session_body = {"title": "deep", "notes": nested(MAX_JSON_DEPTH - 1)}
    job_body = {"tool": "sleepy", "args": {"seconds": nested(MAX_JSON_DEPTH - 2)}}
    assert depth_of(session_body) == depth_of(job_body) == MAX_JSON_DEPTH

    session = api_client.post("/api/sessions", session_body, content_type="application/json")
    job = api_client.post(
        "/api/jobs", job_body, content_type="application/json", headers={"Idempotency-Key": "k"}
    )

    # Refused for what they say (a field the schema does not have, arguments the
    # tool does not take), not for their depth.
    assert session.status_code == 422
    assert session.json()["error"]["code"] == "invalid_request"
    assert job.status_code == 422
    assert job.json()["error"]["code"] == "invalid_arguments"


def log_since(log: Path, offset: int) -> str:
    with open(log, "rb") as lines:
        lines.seek(offset)
        return lines.read().decode(errors="replace")


def function_tool_nested_to(depth: int) -> dict[str, Any]:
    """A function tool whose parameters schema nests objects in objects down to ``depth``
    levels of the request body, or one less (the parameters sit at the 4th level, their
    innermost empty "properties" one below)."""
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    # Each object schema inside another adds two levels ("properties" and the schema).
    for _ in range((depth - 5) // 2):
        schema = {"type": "object", "properties": {"inner": schema}}
    return {"type": "function", "name": "deep", "parameters": schema}


@pytest.mark.django_db(transaction=True)
def test_the_responses_api_refuses_deep_metadata_in_openai_format_and_takes_nesting_to_the_bound(
    processes: Processes, rq_workers: Processes, user: Any
) -> None:
    base = daphne_serve(processes, "daphne-deep-nesting")
    log = processes.artifact("daphne-deep-nesting")
    _, raw = ApiToken.issue(user=user, name="deep")
    headers = {"Authorization": f"Bearer {raw}"}
    before = log.stat().st_size

    deep = f'{{"model": "offline", "input": "hi", "metadata": {{"tag": {nested_text(800)}}}}}'
    refused = httpx.post(
        f"{base}/v1/responses",
        content=deep,
        headers={**headers, "Content-Type": "application/json"},
        timeout=30,
    )

    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "nested_too_deep"
    assert str(MAX_JSON_DEPTH) in error["message"]
    said = log_since(log, before)
    assert "Traceback" not in said
    assert len([line for line in said.splitlines() if "nested deeper" in line]) == 1

    tool = function_tool_nested_to(MAX_JSON_DEPTH)
    body = {"model": "offline", "input": "hi", "background": True, "tools": [tool]}
    assert MAX_JSON_DEPTH - 1 <= depth_of(body) <= MAX_JSON_DEPTH
    taken = httpx.post(f"{base}/v1/responses", json=body, headers=headers, timeout=30)

    assert taken.status_code == 200, taken.text
    assert taken.json()["status"] in ("queued", "in_progress", "completed")
    processes.stop(processes.named("daphne-deep-nesting"))
