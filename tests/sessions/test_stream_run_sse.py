"""GET /api/runs/{run_id}/stream: one run's events only, resumable, ending with the run."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async

from accounts.credentials import Credential
from accounts.models import ApiToken
from agentsite.web.auth import token_credential
from sessions.events import event_append
from sessions.models import AgentSession, Run
from sessions.runs import run_complete, run_start
from sessions.sse import sse_body
from sessions.streams import Frame, LogTail
from sessions.tokens import run_token_seq
from tests.conftest import Processes, api_client_for
from tests.sessions.test_stream_clients import daphne_running, sse_events

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def base_url(processes: Processes) -> Iterator[str]:
    with daphne_running(processes, "daphne-run-sse") as url:
        yield url


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


class FinishingAfterFirstRead(LogTail):
    """A tail whose run ends right after its first read of the log: the moment a
    slow client or a busy server can land in between."""

    def __init__(self, run: Run) -> None:
        super().__init__(session_id=run.session_id, owner_id=run.owner_id, after=0, run_id=run.id)
        self.run = run
        self.reads = 0

    async def replay(self, upto: int | None = None) -> AsyncIterator[Frame]:
        async for frame in super().replay(upto):
            yield frame
        self.reads += 1
        if self.reads == 1:
            await database_sync_to_async(finish_run)(self.run)


def finish_run(run: Run) -> None:
    delta(run, "lo")
    run_complete(run_id=run.id, usage={})


async def test_a_run_that_ends_between_two_reads_still_ends_with_run_finished(
    processes: Processes, user: Any
) -> None:
    run = await database_sync_to_async(running_run)(user)
    credential = await database_sync_to_async(token_holder)(user)
    group = f"{AgentSession.group_prefix()}{run.session_id}"
    tail = FinishingAfterFirstRead(run)
    body = [chunk async for chunk in sse_body(tail, group, credential, until_run_ends=True)]
    lines = [line for chunk in body for line in chunk.splitlines()]
    frames = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data:")]
    assert [f["kind"] for f in frames] == ["run_started", "assistant_delta", "run_finished"]


def token_holder(user: Any) -> Credential:
    api_token, _ = ApiToken.issue(user=user, name="test")
    return token_credential(api_token)


class WrittenWire:
    """A connection that takes everything at once and keeps what was written to it, in
    place of daphne's (``agentsite.web.wire.ResponseWire``) for a stream run in-process;
    the streams over a real daphne above go through the real one."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def unsent(self) -> int:
        return 0

    def write(self, data: bytes) -> bool:
        self.written.append(data)
        return True

    def drop(self) -> None:
        raise AssertionError("a client that reads everything is never dropped")


async def test_under_daphne_a_stream_writes_its_events_to_the_connection_in_order(
    processes: Processes, user: Any
) -> None:
    """Each event yielded to Django passes its response loop, every ASGI middleware's
    ``send`` and daphne's dispatch on its way to the request's ``write``: with the
    connection at hand, the stream writes its events there, and yields only its opening
    lines (which start the response) through ASGI."""
    run = await database_sync_to_async(running_run)(user)
    await database_sync_to_async(delta)(run, "hel")
    await database_sync_to_async(finish_run)(run)
    credential = await database_sync_to_async(token_holder)(user)
    group = f"{AgentSession.group_prefix()}{run.session_id}"
    tail = LogTail(session_id=run.session_id, owner_id=run.owner_id, after=0, run_id=run.id)
    wire = WrittenWire()
    yielded = [
        chunk
        async for chunk in sse_body(
            tail,
            group,
            credential,
            until_run_ends=True,
            wire=wire,  # type: ignore[arg-type]
        )
    ]
    assert len(yielded) == 1 and yielded[0].startswith("retry: ")
    events = list(sse_events(b"".join(wire.written).decode().splitlines()))
    kinds = [e["data"]["kind"] for e in events]
    assert kinds == ["run_started", "assistant_delta", "assistant_delta", "run_finished"]
    assert [e["data"]["payload"].get("text") for e in events[1:3]] == ["hel", "lo"]
    seqs = [e["data"]["seq"] for e in events]
    assert seqs == sorted(set(seqs))
    last = run_token_seq(events[-1]["id"], run_id=run.id, owner_id=user.pk)
    assert last == seqs[-1]
