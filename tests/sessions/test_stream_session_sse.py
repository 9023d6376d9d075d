"""GET /api/sessions/{id}/stream over a real daphne: replay, live, resume by Last-Event-ID."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from typing import Any

import httpx
import pytest

from sessions.events import event_append
from sessions.models import AgentSession
from sessions.tokens import session_token_seq
from tests.conftest import Processes, api_client_for
from tests.sessions.test_stream_clients import daphne_running, daphne_serve, sse_events

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def base_url(processes: Processes) -> Iterator[str]:
    with daphne_running(processes, "daphne-sse") as url:
        yield url


def bearer(user: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_client_for(user).raw_token}"}  # type: ignore[attr-defined]


def session_with(user: Any, count: int) -> AgentSession:
    session = AgentSession.objects.create(owner=user)
    for i in range(count):
        event_append(session_id=session.id, kind="assistant_delta", payload={"text": f"<{i + 1}>"})
    return session


def stream(
    base_url: str, path: str, headers: dict[str, str]
) -> Generator[dict[str, Any], None, None]:
    with httpx.stream("GET", base_url + path, headers=headers, timeout=30) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield from (e for e in sse_events(response.iter_lines()) if e["data"] is not None)


def test_it_replays_after_the_query_token_then_streams_live(base_url: str, user: Any) -> None:
    session = session_with(user, 3)
    first = next(stream(base_url, f"/api/sessions/{session.id}/stream", bearer(user)))
    assert first["data"]["seq"] == 1

    events = stream(
        base_url, f"/api/sessions/{session.id}/stream?after={first['id']}", bearer(user)
    )
    assert [next(events)["data"]["seq"] for _ in range(2)] == [2, 3]
    threading.Timer(
        0.3,
        lambda: event_append(
            session_id=session.id, kind="assistant_message", payload={"text": "hi"}
        ),
    ).start()
    live = next(events)
    assert (live["data"]["seq"], live["data"]["kind"], live["data"]["payload"]) == (
        4,
        "assistant_message",
        {"text": "hi"},
    )
    assert live["id"] == live["data"]["token"]
    assert session_token_seq(live["id"], session_id=session.id, owner_id=user.pk) == 4
    events.close()


def test_last_event_id_wins_over_the_query_string(base_url: str, user: Any) -> None:
    session = session_with(user, 5)
    all_events = stream(base_url, f"/api/sessions/{session.id}/stream", bearer(user))
    tokens = [next(all_events)["id"] for _ in range(5)]
    all_events.close()

    headers = {**bearer(user), "Last-Event-ID": tokens[3]}
    resumed = stream(base_url, f"/api/sessions/{session.id}/stream?after={tokens[0]}", headers)
    assert next(resumed)["data"]["seq"] == 5
    resumed.close()


def test_a_browser_session_cookie_also_authenticates(base_url: str, user: Any) -> None:
    from django.test import Client

    session = session_with(user, 1)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    events = stream(base_url, f"/api/sessions/{session.id}/stream", {"Cookie": cookie})
    assert next(events)["data"]["seq"] == 1
    events.close()


@pytest.mark.parametrize(
    ("who", "query", "status", "code"),
    [
        ("nobody", "", 401, "unauthorized"),
        ("other", "", 404, "not_found"),
        ("owner", "?after=tampered", 400, "bad_token"),
    ],
)
def test_refusals_use_the_api_error_format(
    base_url: str, user: Any, other_user: Any, who: str, query: str, status: int, code: str
) -> None:
    session = session_with(user, 1)
    headers = {"nobody": {}, "other": bearer(other_user), "owner": bearer(user)}[who]
    response = httpx.get(f"{base_url}/api/sessions/{session.id}/stream{query}", headers=headers)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_the_docs_list_the_stream_endpoints(base_url: str, user: Any) -> None:
    schema = httpx.get(f"{base_url}/api/openapi.json").json()
    assert "/api/sessions/{session_id}/stream" in schema["paths"]
    assert "/api/runs/{run_id}/stream" in schema["paths"]


def test_open_streams_hold_no_database_connection(processes: Processes, user: Any) -> None:
    """Hundreds of followers must not hold hundreds of connections for as long as they follow.

    Before: each stream kept the connection its authentication opened until it
    ended; 200 followers on PostgreSQL got "too many clients", and with a pool
    they drained it (and deadlocked on it). Here the web process's pool has 2
    connections and 8 streams stay open while the API goes on answering.
    """
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("connection pools are PostgreSQL's (the suite also runs on it)")
    base = daphne_serve(
        processes,
        "daphne-small-pool",
        env={
            "AGENTSITE_DB_POOL": "true",
            "AGENTSITE_DB_POOL_MAX": "2",
            "AGENTSITE_DB_POOL_TIMEOUT_S": "3",
        },
    )
    session = session_with(user, 1)
    headers = bearer(user)
    first_frames: list[int] = []
    errors: list[str] = []
    opened = threading.Barrier(9, timeout=30)
    done = threading.Event()

    def follow() -> None:
        events = stream(base, f"/api/sessions/{session.id}/stream", headers)
        try:
            first_frames.append(next(events)["data"]["seq"])
        except Exception as exc:
            errors.append(repr(exc))
        try:
            opened.wait()
            done.wait(30)  # the stream stays open meanwhile
        except threading.BrokenBarrierError:
            pass
        finally:
            events.close()

    followers = [threading.Thread(target=follow) for _ in range(8)]
    for thread in followers:
        thread.start()
    try:
        opened.wait()
        assert errors == [] and first_frames == [1] * 8
        me = httpx.get(base + "/api/me", headers=headers, timeout=10)
        assert me.status_code == 200
    finally:
        done.set()
        for thread in followers:
            thread.join(10)
