"""Requests to synchronous views run on the kept request threads (``agentsite.web.handler``).

Each thread keeps its database connection from one request to the next; one on which
an error occurred is closed. An ``async def`` view never holds one of those threads.
The handler is the one daphne serves (``agentsite.asgi``), driven here in-process.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections
from django.test import override_settings

from agentsite.web.handler import REQUEST_THREAD_PREFIX, Handler, after_request
from tests.agentsite.web import request_thread_urls as urls
from tests.asgi_scope import http_scope

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def handler() -> Iterator[Handler]:
    urls.seen.clear()
    with override_settings(
        ROOT_URLCONF="tests.agentsite.web.request_thread_urls", AGENTSITE_REQUEST_THREADS=1
    ):
        app = Handler()
        try:
            yield app
        finally:
            # The thread's connection, closed where it lives (a test database with an
            # open connection cannot be dropped), then the thread itself.
            app.threads.submit(connections.close_all).result()
            app.threads.shutdown(wait=True)
            urls.seen.clear()


async def call(app: Handler, path: str) -> tuple[int, dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client stays: no disconnect
        raise AssertionError("unreachable")

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = http_scope(path)
    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body)


def test_a_synchronous_view_runs_on_a_request_thread_that_keeps_its_connection(
    handler: Handler,
) -> None:
    async def twice() -> list[tuple[int, dict[str, Any]]]:
        return [await call(handler, "/test/where"), await call(handler, "/test/where")]

    (status1, first), (status2, second) = asyncio.run(twice())
    assert status1 == status2 == 200
    assert first["thread"].startswith(REQUEST_THREAD_PREFIX)
    assert second["thread"] == first["thread"]
    assert urls.seen[first["connection"]] is not None
    if connection.vendor == "sqlite":
        # The second request ran on the connection the first one opened.
        assert urls.seen[second["connection"]] is urls.seen[first["connection"]]
    else:
        # Unpooled PostgreSQL: Django's own rule, CONN_MAX_AGE (0: closed after each).
        assert urls.seen[second["connection"]] is not urls.seen[first["connection"]]


def test_a_connection_on_which_an_error_occurred_is_not_kept(handler: Handler) -> None:
    async def both() -> list[tuple[int, dict[str, Any]]]:
        failing = await call(handler, "/test/fails-in-the-database")
        return [failing, await call(handler, "/test/where")]

    (status1, failed), (status2, after) = asyncio.run(both())
    assert status1 == status2 == 200
    assert urls.seen[after["connection"]] is not urls.seen[failed["connection"]]


def test_a_pooled_connection_goes_back_after_each_request(
    handler: Handler, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the web process on PostgreSQL, whose pool takes a connection back, does after
    # a request (the settings only for the choice: the test's connection has no pool).
    database = settings.DATABASES["default"]
    with monkeypatch.context() as patched:
        patched.setitem(database, "OPTIONS", {**database.get("OPTIONS", {}), "pool": {}})
        handler.after_request = after_request()

    async def twice() -> list[tuple[int, dict[str, Any]]]:
        return [await call(handler, "/test/where"), await call(handler, "/test/where")]

    (_, first), (_, second) = asyncio.run(twice())
    assert urls.seen[second["connection"]] is not urls.seen[first["connection"]]
    # Nothing is left open on the thread between requests.
    assert handler.threads.submit(lambda: connections["default"].connection).result() is None


def test_an_async_view_holds_no_request_thread(handler: Handler) -> None:
    # One request thread: an async view waiting on the event loop must not keep a
    # synchronous request from being answered meanwhile.
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], bool]:
        urls.release["event"] = asyncio.Event()
        waiting = asyncio.create_task(call(handler, "/test/waits"))
        await asyncio.sleep(0.1)
        _, answered = await asyncio.wait_for(call(handler, "/test/where"), 30)
        was_waiting = not waiting.done()
        urls.release["event"].set()
        _, waited = await asyncio.wait_for(waiting, 30)
        return answered, waited, was_waiting

    answered, waited, was_waiting = asyncio.run(scenario())
    assert was_waiting, "the async view answered before it was released"
    assert answered["thread"].startswith(REQUEST_THREAD_PREFIX)
    assert waited["thread"] == threading.main_thread().name
