"""What one open websocket costs a web process, and the light inbox each follower keeps.

A web process holds thousands of followers (bench/stream.py: 1,000 and 5,000 on one
daphne), so each one's own objects count: the follower's live queue was an
``asyncio.Queue`` (three deques and an Event, about 3 KiB empty), and a script's
socket went through the cookie and session middleware it never uses (a session
store, a lazy user and a copy of the scope per layer).
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from typing import Any, cast

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from accounts.models import ApiToken
from agentsite.asgi import application
from agentsite.web.origin import BrowserOriginOrToken
from sessions.streams import LiveInbox
from tests.sessions.test_stream_clients import make_session

SOCKETS = 100
# In this process, per socket, including the two queues of the test's own
# communicator (about 6 KiB): 27.4 KiB before, 16.7 KiB after.
BUDGET_BYTES = 20 * 1024


async def test_an_inbox_hands_messages_over_in_order_and_refuses_past_its_bound() -> None:
    inbox = LiveInbox(2)
    inbox.put_nowait({"type": "stream.check"})
    inbox.put_nowait(cast(Any, {"type": "session.event", "seq": 1}))
    with pytest.raises(asyncio.QueueFull):
        inbox.put_nowait({"type": "stream.check"})

    assert inbox.get_nowait()["type"] == "stream.check"
    second = await inbox.next(5)
    assert second is not None and second["type"] == "session.event"
    assert inbox.empty()
    with pytest.raises(asyncio.QueueEmpty):
        inbox.get_nowait()


async def test_a_waiting_reader_wakes_on_the_next_message_and_times_out_without_one() -> None:
    inbox = LiveInbox(10)
    reader = asyncio.create_task(inbox.next(5))
    await asyncio.sleep(0)
    inbox.put_nowait({"type": "stream.check"})

    assert await asyncio.wait_for(reader, 5) == {"type": "stream.check"}
    assert await inbox.next(0.01) is None
    inbox.put_nowait({"type": "stream.check"})  # a reader that timed out left no waiter behind
    assert await inbox.next(0.01) == {"type": "stream.check"}


async def test_a_handshake_without_origin_skips_the_cookie_stack() -> None:
    reached: list[str] = []

    def app(name: str) -> Any:
        async def called(scope: dict[str, Any], receive: Any, send: Any) -> None:
            reached.append(name)
            assert b"cookie" not in dict(scope["headers"]) or name == "browser"

        return called

    guard = BrowserOriginOrToken(app("browser"), cookieless=app("script"))
    scope = {"type": "websocket", "headers": [(b"host", b"x"), (b"cookie", b"sessionid=1")]}
    await guard(scope, None, None)

    assert reached == ["script"]


async def test_a_page_that_offers_a_token_skips_the_cookie_stack(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    reached: list[str] = []

    def app(name: str) -> Any:
        async def called(scope: dict[str, Any], receive: Any, send: Any) -> None:
            reached.append(name)

        return called

    guard = BrowserOriginOrToken(app("cookie"), cookieless=app("token"))
    headers = [(b"host", b"127.0.0.1:8000"), (b"origin", b"http://127.0.0.1:8000")]
    page = {"type": "websocket", "headers": headers, "subprotocols": ["agentsite"]}
    await guard(page, None, None)
    await guard({**page, "subprotocols": ["agentsite", "agentsite.bearer.abc"]}, None, None)

    # The consumer authenticates a socket that offers a token by the token alone.
    assert reached == ["cookie", "token"]


@pytest.mark.django_db(transaction=True)
async def test_an_open_script_socket_costs_the_process_a_bounded_amount(user: Any) -> None:
    session = await make_session(user, events=1)
    _, raw = await database_sync_to_async(ApiToken.issue)(user=user, name="memory")

    def socket() -> WebsocketCommunicator:
        return WebsocketCommunicator(
            application,
            f"/ws/sessions/{session.id}/",
            subprotocols=["agentsite", f"agentsite.bearer.{raw}"],
        )

    async def opened() -> WebsocketCommunicator:
        comm = socket()
        connected, _ = await comm.connect(timeout=10)
        assert connected
        return comm

    comms = [await opened() for _ in range(10)]  # the process's feed and caches warm
    await asyncio.sleep(0.3)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        comms += [await opened() for _ in range(SOCKETS)]
        await asyncio.sleep(0.5)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        await asyncio.gather(*(comm.disconnect() for comm in comms))
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))

    assert grown / SOCKETS <= BUDGET_BYTES, f"{grown / SOCKETS / 1024:.1f} KiB per socket"
