"""Clients and data the stream tests share: websocket communicators on the real ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from accounts.models import ApiToken
from agentsite.asgi import application
from sessions.events import event_append
from sessions.models import AgentSession, Event
from sessions.tokens import session_token

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@database_sync_to_async
def cookie_for(user: Any) -> tuple[bytes, bytes]:
    """The Cookie header of a browser logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return (
        b"cookie",
        f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode(),
    )


@database_sync_to_async
def api_token_for(user: Any) -> str:
    return ApiToken.issue(user=user, name="ws")[1]


def token_at(session: AgentSession, seq: int) -> str:
    return session_token(session_id=session.id, owner_id=session.owner_id, seq=seq)


def communicator(
    session_id: str,
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    after: str = "",
    query: str = "",
    subprotocols: list[str] | None = None,
    app: Any = application,
) -> WebsocketCommunicator:
    path = f"/ws/sessions/{session_id}/?after={after}{query}"
    return WebsocketCommunicator(
        app, path, headers=[ORIGIN, *(headers or [])], subprotocols=subprotocols
    )


async def connect(comm: WebsocketCommunicator) -> None:
    connected, _ = await comm.connect(timeout=10)
    assert connected


async def frames(
    comm: WebsocketCommunicator, count: int, timeout: float = 15
) -> list[dict[str, Any]]:
    """The next ``count`` frames the server sends."""
    return [json.loads(await comm.receive_from(timeout)) for _ in range(count)]


async def frames_until(
    comm: WebsocketCommunicator, last_seq: int, timeout: float = 30
) -> list[dict[str, Any]]:
    """Event frames up to and including ``last_seq``, in the order received."""
    received: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while not received or received[-1]["seq"] < last_seq:
            frame = json.loads(await comm.receive_from(timeout))
            if "seq" in frame:
                received.append(frame)
    return received


async def close_code(comm: WebsocketCommunicator) -> int | None:
    """The code of the close the server sends next (after accepting), with no data before it."""
    message = await comm.receive_output(10)
    assert message["type"] == "websocket.close", message
    return message.get("code")


append = database_sync_to_async(event_append)


@database_sync_to_async
def make_session(owner: Any, events: int = 0) -> AgentSession:
    session = AgentSession.objects.create(owner=owner, title="stream test")
    for i in range(events):
        event_append(session_id=session.id, kind="assistant_delta", payload={"text": f"<{i + 1}>"})
    return session


@database_sync_to_async
def logged_seqs(session: AgentSession) -> list[int]:
    return list(Event.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))


# --- a real web server and SSE parsing -------------------------------------------------------


def daphne_serve(processes: Any, name: str = "daphne", env: dict[str, str] | None = None) -> str:
    """Start the real web server (daphne on ``agentsite.asgi``, as in production) on a free port.

    Returns its base URL once this daphne says it listens there. A port found
    free can be taken before daphne binds it (by another test worker's server):
    daphne then logs a listen failure and exits, while a connection to the port
    would reach the other server. So readiness is read from daphne's own log, and
    a lost port is tried again with another.
    """
    import time

    from agentsite.core.embedded_redis import free_port

    for _ in range(5):
        port = free_port()
        log = processes.artifact(name)
        seen = log.stat().st_size if log.exists() else 0
        daphne = ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "agentsite.asgi:application"]
        proc = processes.start_python(name, *daphne, env=env)
        deadline = time.monotonic() + 30
        while True:
            with open(log, "rb") as lines:
                lines.seek(seen)
                said = lines.read().decode(errors="replace")
            if f"Listening on TCP address 127.0.0.1:{port}" in said:
                return f"http://127.0.0.1:{port}"
            if "Listen failure" in said:
                processes.stop(proc)
                break  # the port was taken meanwhile: another one
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daphne did not start; see {log}")
            time.sleep(0.1)
    raise RuntimeError(f"daphne found no free port in 5 tries; see {log}")


@contextlib.contextmanager
def daphne_running(
    processes: Any, name: str = "daphne", env: dict[str, str] | None = None
) -> Iterator[str]:
    """``daphne_serve`` for the ``with`` block only (a module's fixture, one test): the
    server stops at its end, and its database connections close with it. Left running
    to the end of the session, every module's server kept its connections, and the
    suite ran PostgreSQL out of clients ("too many clients already")."""
    url = daphne_serve(processes, name, env)
    try:
        yield url
    finally:
        processes.stop(processes.named(name))


def sse_events(lines: Any) -> Any:
    """Parse an iterator of SSE lines into ``{"id", "data", "comments"}`` dicts, one per event."""
    event: dict[str, Any] = {"id": None, "data": None, "comments": []}
    for line in lines:
        if line == "":
            if event["data"] is not None or event["comments"]:
                yield event
            event = {"id": None, "data": None, "comments": []}
        elif line.startswith(":"):
            event["comments"].append(line[1:].strip())
        elif line.startswith("id:"):
            event["id"] = line[3:].strip()
        elif line.startswith("data:"):
            event["data"] = json.loads(line[5:].strip())
