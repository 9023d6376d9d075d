"""A live connection ends when the credential it was opened with goes.

Real daphne, real clients: a websocket (the ``websockets`` client) and server-sent
event streams (httpx). The first server never re-checks on its own (its idle
ticks are an hour apart), so what closes its connections is the channel-layer
message a revocation, deactivation or logout sends; the second re-checks every
second and gets no message at all (the token row is deleted behind the
signals' back, as if Redis had lost it): the database is the truth.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as websocket_connect
from websockets.typing import Subprotocol

from accounts.models import ApiToken
from responses.models import AgentResponse
from sessions.events import event_append
from sessions.models import Event, Run
from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_running

pytestmark = pytest.mark.django_db(transaction=True)

WAIT_S = 30.0  # generous: a close takes milliseconds


@pytest.fixture(scope="module")
def prompted(processes: Processes) -> Iterator[str]:
    """A web server whose streams re-check only when told to."""
    hour = {"AGENTSITE_SSE_HEARTBEAT_S": "3600", "AGENTSITE_WS_IDLE_CHECK_S": "3600"}
    with daphne_running(processes, "daphne-revoke-prompted", env=hour) as url:
        yield url


@pytest.fixture(scope="module")
def rechecking(processes: Processes) -> Iterator[str]:
    """A web server whose streams re-check their credential every second when idle."""
    second = {"AGENTSITE_SSE_HEARTBEAT_S": "1", "AGENTSITE_WS_IDLE_CHECK_S": "1"}
    with daphne_running(processes, "daphne-revoke-rechecking", env=second) as url:
        yield url


# --- clients -------------------------------------------------------------------------------


class Socket:
    """A session websocket opened with an API token (subprotocol) or a login cookie."""

    def __init__(self, base: str, session_id: str, *, token: str = "", cookie: str = "") -> None:
        url = base.replace("http://", "ws://") + f"/ws/sessions/{session_id}/"
        protocols = [Subprotocol("agentsite")]
        headers = {}
        if token:
            protocols.append(Subprotocol(f"agentsite.bearer.{token}"))
        if cookie:
            headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}", "Origin": base}
        self.opened = ExitStack()
        self.ws: ClientConnection = self.opened.enter_context(
            websocket_connect(
                url, subprotocols=protocols, additional_headers=headers, open_timeout=10
            )
        )

    def next_seq(self) -> int:
        """The seq of the next event frame (the stream follows live once one arrived)."""
        while True:
            frame = json.loads(self.ws.recv(timeout=WAIT_S))
            if "seq" in frame:
                return int(frame["seq"])

    def close_code(self) -> int | None:
        """Read until the server closes the socket; its close code."""
        try:
            while True:
                self.ws.recv(timeout=WAIT_S)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None


class Stream(threading.Thread):
    """A server-sent event stream read on a thread of its own."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.url, self.headers = url, headers
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.ended = threading.Event()
        self.response: httpx.Response | None = None
        self.start()

    def run(self) -> None:
        try:
            timeout = httpx.Timeout(10, read=None)
            with httpx.stream("GET", self.url, headers=self.headers, timeout=timeout) as response:
                self.response = response
                for line in response.iter_lines():
                    with self.changed:
                        self.lines.append(line)
                        self.changed.notify_all()
        except httpx.HTTPError:
            pass
        finally:
            self.ended.set()
            with self.changed:
                self.changed.notify_all()

    def wait_for(self, text: str) -> None:
        """Until a line containing ``text`` has come (the stream is following by then)."""
        with self.changed:
            assert self.changed.wait_for(
                lambda: any(text in line for line in self.lines) or self.ended.is_set(), WAIT_S
            )
        assert any(text in line for line in self.lines), self.lines

    def close(self) -> None:
        """Hang up: the socket is shut down under the reading thread, and the server sees it."""
        if self.response is not None:
            network = self.response.extensions["network_stream"]
            with contextlib.suppress(OSError):
                network.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
        self.join(WAIT_S)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_session(base: str, token: str) -> str:
    response = httpx.post(f"{base}/api/sessions", json={}, headers=bearer(token), timeout=10)
    assert response.status_code == 201, response.text
    return str(response.json()["session_id"])


def note(session_id: str, text: str) -> int:
    """Append an event to the session's log (committed, then published); its seq."""
    kind = Event.Kind.USER_MESSAGE
    return event_append(session_id=session_id, kind=kind, payload={"text": text}).seq


class Follower:
    """One caller following one session over a websocket and an SSE stream."""

    def __init__(self, base: str, session_id: str, *, token: str = "", cookie: str = "") -> None:
        self.session_id = session_id
        self.socket = Socket(base, session_id, token=token, cookie=cookie)
        headers = bearer(token) if token else {"Cookie": f"sessionid={cookie}"}
        self.stream = Stream(f"{base}/api/sessions/{session_id}/stream", headers)

    def wait_following(self, seq: int) -> None:
        assert self.socket.next_seq() == seq
        self.stream.wait_for(f'"seq":{seq}')

    def assert_ended(self) -> None:
        assert self.socket.close_code() == 4401
        assert self.stream.ended.wait(WAIT_S), self.stream.lines[-5:]

    def assert_alive(self) -> None:
        seq = note(self.session_id, "still there?")
        assert self.socket.next_seq() == seq
        self.stream.wait_for(f'"seq":{seq}')
        assert not self.stream.ended.is_set()

    def close(self) -> None:
        self.socket.opened.close()
        self.stream.close()


@pytest.fixture
def followers() -> Iterator[list[Follower]]:
    opened: list[Follower] = []
    yield opened
    for follower in opened:
        follower.close()


def follow(
    followers: list[Follower], base: str, token: str, *, session_token: str = "", cookie: str = ""
) -> Follower:
    """Open a websocket and a stream on a new session of ``token``'s user, caught up."""
    session_id = new_session(base, session_token or token)
    seq = note(session_id, "hello")
    follower = Follower(base, session_id, token=token, cookie=cookie)
    followers.append(follower)
    follower.wait_following(seq)
    return follower


def token_of(user: Any, name: str = "live") -> tuple[ApiToken, str]:
    return ApiToken.issue(user=user, name=name)


# --- revoking a token ------------------------------------------------------------------------


def revoke_through_the_api(base: str, token: ApiToken, other_raw: str) -> None:
    response = httpx.delete(f"{base}/api/tokens/{token.pk}", headers=bearer(other_raw), timeout=10)
    assert response.status_code == 204, response.text


def revoke_with_the_command(base: str, token: ApiToken, other_raw: str) -> None:
    call_command("revoke_api_token", token.prefix)


def revoke_in_the_admin(base: str, token: ApiToken, other_raw: str) -> None:
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(admin)
    response = client.post(f"/admin/accounts/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302, response.content[:300]


@pytest.mark.parametrize(
    "revoke", [revoke_through_the_api, revoke_with_the_command, revoke_in_the_admin]
)
def test_revoking_a_token_ends_its_websocket_and_streams(
    prompted: str, user: Any, other_user: Any, followers: list[Follower], revoke: Any
) -> None:
    token, raw = token_of(user)
    _, kept_raw = token_of(user, "kept")
    _, other_raw = token_of(other_user)
    revoked = follow(followers, prompted, raw)
    same_user_other_token = follow(followers, prompted, kept_raw)
    other = follow(followers, prompted, other_raw)

    revoke(prompted, token, kept_raw)

    revoked.assert_ended()
    same_user_other_token.assert_alive()
    other.assert_alive()
    response = httpx.get(f"{prompted}/api/sessions", headers=bearer(raw), timeout=10)
    assert response.status_code == 401


def test_a_run_stream_and_a_responses_stream_end_with_their_token(prompted: str, user: Any) -> None:
    token, raw = token_of(user)
    session_id = new_session(prompted, raw)
    # A run and a response that nobody works on: their streams stay open until they end.
    run = Run.objects.create(session_id=session_id, owner=user)
    response = AgentResponse.objects.create(
        owner=user, session_id=session_id, input_seq=note(session_id, "hi"), model="offline"
    )
    run_stream = Stream(f"{prompted}/api/runs/{run.id}/stream", bearer(raw))
    v1_stream = Stream(f"{prompted}/v1/responses/{response.id}?stream=true", bearer(raw))
    try:
        run_stream.wait_for("heartbeat")
        v1_stream.wait_for("heartbeat")

        revoke_through_the_api(prompted, token, token_of(user, "kept")[1])

        assert run_stream.ended.wait(WAIT_S), run_stream.lines[-5:]
        assert v1_stream.ended.wait(WAIT_S), v1_stream.lines[-5:]
        # The Responses API's streaming error event: type "error", numbered after the rest.
        events = [
            json.loads(line[len("data: ") :])
            for line in v1_stream.lines
            if line.startswith("data: ")
        ]
        assert v1_stream.lines.count("event: error") == 1
        error = events[-1]
        assert set(error) == {"type", "code", "message", "param", "sequence_number"}, error
        assert error["type"] == "error"
        assert error["code"] == "invalid_api_key"
        assert error["message"] and error["param"] is None
        assert (
            error["sequence_number"]
            == max([-1, *(event["sequence_number"] for event in events[:-1])]) + 1
        )
    finally:
        run_stream.close()
        v1_stream.close()


# --- deactivating a user, logging out ----------------------------------------------------------


def test_deactivating_a_user_ends_their_connections(
    prompted: str, user: Any, other_user: Any, followers: list[Follower]
) -> None:
    _, raw = token_of(user)
    _, other_raw = token_of(other_user)
    theirs = follow(followers, prompted, raw)
    other = follow(followers, prompted, other_raw)

    user.is_active = False
    user.save()

    theirs.assert_ended()
    other.assert_alive()


def login_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return str(client.cookies[settings.SESSION_COOKIE_NAME].value)


def log_out(base: str, cookie: str) -> None:
    """POST /logout/ as the browser does (its CSRF cookie and token, its origin)."""
    csrf = "c" * 32
    response = httpx.post(
        f"{base}/logout/",
        cookies={settings.SESSION_COOKIE_NAME: cookie, settings.CSRF_COOKIE_NAME: csrf},
        headers={"X-CSRFToken": csrf, "Origin": base, "Referer": f"{base}/"},
        timeout=10,
    )
    assert response.status_code in (200, 302), response.text[:300]


def test_logging_out_ends_the_connections_of_that_login_only(
    prompted: str, user: Any, followers: list[Follower]
) -> None:
    _, raw = token_of(user)
    cookie, other_login = login_cookie(user), login_cookie(user)
    logged_out = follow(followers, prompted, "", session_token=raw, cookie=cookie)
    other_browser = follow(followers, prompted, "", session_token=raw, cookie=other_login)
    scripted = follow(followers, prompted, raw)

    log_out(prompted, cookie)

    logged_out.assert_ended()
    other_browser.assert_alive()
    scripted.assert_alive()


# --- when the channel layer lost the message -------------------------------------------------


def test_a_token_deleted_without_a_message_still_ends_its_connections(
    rechecking: str, user: Any, other_user: Any, followers: list[Follower]
) -> None:
    token, raw = token_of(user)
    _, other_raw = token_of(other_user)
    revoked = follow(followers, rechecking, raw)
    other = follow(followers, rechecking, other_raw)

    # Deleted behind the signals' back: no message is sent, as if Redis had lost it.
    ApiToken.objects.filter(pk=token.pk)._raw_delete(ApiToken.objects.db)

    revoked.assert_ended()
    other.assert_alive()


# --- MCP -------------------------------------------------------------------------------------


def mcp_listening(base: str, raw: str) -> Stream:
    """An initialised MCP session's GET stream (server-to-client messages), open."""
    headers = {**bearer(raw), "Accept": "application/json, text/event-stream"}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "revocation-test", "version": "1"},
        },
    }
    response = httpx.post(f"{base}/mcp", json=hello, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    headers = {
        **headers,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = httpx.post(f"{base}/mcp", json=ready, headers=headers, timeout=10)
    assert response.status_code == 202, response.text
    stream = Stream(f"{base}/mcp", {**headers, "Accept": "text/event-stream"})
    deadline = threading.Event()
    while stream.response is None and not stream.ended.is_set():
        deadline.wait(0.05)
    assert stream.response is not None and stream.response.status_code == 200
    return stream


def test_an_mcp_stream_ends_with_its_token(prompted: str, user: Any, other_user: Any) -> None:
    token, raw = token_of(user)
    _, other_raw = token_of(other_user)
    revoked, other = mcp_listening(prompted, raw), mcp_listening(prompted, other_raw)
    try:
        revoke_through_the_api(prompted, token, token_of(user, "kept")[1])

        assert revoked.ended.wait(WAIT_S)
        assert not other.ended.is_set()
    finally:
        revoked.close()
        other.close()
