"""GET /api/runs/{run_id}/stream: one run's events only, resumable, ending with the run."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from sessions.events import event_append
from sessions.models import AgentSession, Run
from sessions.runs import run_complete, run_start
from sessions.tokens import run_token_seq
from tests.conftest import Processes, api_client_for
from tests.sessions.test_stream_clients import daphne_serve, sse_events

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def base_url(processes: Processes) -> str:
    return daphne_serve(processes, "daphne-run-sse")


def bearer(user: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_client_for(user).raw_token}"}  # type: ignore[attr-defined]


def running_run(user: Any) -> Run:
    session = AgentSession.objects.create(owner=user)
    event_append(session_id=session.id, kind="user_message", payload={"text": "hi"}, pending=True)
    run = Run.objects.create(session=session, owner=user)
    assert run_start(run_id=run.id) is not None
    return run


def delta(run: Run, text: str) -> None:
    event_append(
        session_id=run.session_id, kind="assistant_delta", payload={"text": text}, run_id=run.id
    )


def read_all(
    base_url: str, run: Run, headers: dict[str, str], token: str = ""
) -> list[dict[str, Any]]:
    """Every event of the stream until the server ends it."""
    url = f"{base_url}/api/runs/{run.id}/stream?continuation_token={token}"
    with httpx.stream("GET", url, headers=headers, timeout=30) as response:
        assert response.status_code == 200
        return [e for e in sse_events(response.iter_lines()) if e["data"] is not None]


def test_it_streams_only_the_runs_events_and_ends_with_the_run(base_url: str, user: Any) -> None:
    run = running_run(user)
    delta(run, "Hel")

    def finish() -> None:
        # Another writer's event in the same session must not show up.
        event_append(session_id=run.session_id, kind="user_message", payload={"text": "meanwhile"})
        delta(run, "lo")
        run_complete(run_id=run.id, usage={})

    threading.Timer(0.5, finish).start()
    events = read_all(base_url, run, bearer(user))
    kinds = [e["data"]["kind"] for e in events]
    assert kinds == ["run_started", "assistant_delta", "assistant_delta", "run_finished"]
    assert "".join(e["data"]["payload"].get("text", "") for e in events) == "Hello"
    for e in events:
        assert e["id"] == e["data"]["token"]
        assert run_token_seq(e["id"], run_id=run.id, owner_id=user.pk) == e["data"]["seq"]


def test_the_last_token_resumes_after_it(base_url: str, user: Any) -> None:
    run = running_run(user)
    for text in ["a", "b", "c"]:
        delta(run, text)
    run_complete(run_id=run.id, usage={})
    everything = read_all(base_url, run, bearer(user))
    resumed = read_all(base_url, run, bearer(user), token=everything[1]["id"])
    assert [e["data"]["seq"] for e in resumed] == [e["data"]["seq"] for e in everything[2:]]
    assert resumed[-1]["data"]["kind"] == "run_finished"


def test_resuming_after_the_end_of_a_finished_run_ends_at_once(base_url: str, user: Any) -> None:
    run = running_run(user)
    run_complete(run_id=run.id, usage={})
    everything = read_all(base_url, run, bearer(user))
    assert read_all(base_url, run, bearer(user), token=everything[-1]["id"]) == []


def test_a_session_token_is_not_a_run_token(base_url: str, user: Any, other_user: Any) -> None:
    run = running_run(user)
    session_stream = f"{base_url}/api/sessions/{run.session_id}/stream"
    with httpx.stream("GET", session_stream, headers=bearer(user), timeout=30) as response:
        first = next(e for e in sse_events(response.iter_lines()) if e["data"] is not None)
    refused = httpx.get(
        f"{base_url}/api/runs/{run.id}/stream?continuation_token={first['id']}",
        headers=bearer(user),
    )
    assert (refused.status_code, refused.json()["error"]["code"]) == (404, "not_found")
    foreign = httpx.get(f"{base_url}/api/runs/{run.id}/stream", headers=bearer(other_user))
    assert foreign.status_code == 404
