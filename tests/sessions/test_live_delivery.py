"""Delivery without waking the follower (streams.admit_parked) and credential
checks shared by a process's followers (streams.credential_check)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.db import database_sync_to_async

from accounts.credentials import Credential, CredentialRevoked
from accounts.models import ApiToken
from agentsite.web.auth import token_credential
from sessions import streams
from sessions.payloads import SessionEventMessage
from sessions.streams import credential_watch

pytestmark = pytest.mark.django_db(transaction=True)


def event(seq: int, run_id: str | None = None) -> SessionEventMessage:
    return {
        "type": "session.event",
        "seq": seq,
        "kind": "assistant_delta",
        "payload": {"text": f"<{seq}>"},
        "run_id": run_id,
    }  # type: ignore[typeddict-item]


async def parked(live: streams.LiveInbox, timeout: float = 60) -> asyncio.Task[Any]:
    reader = asyncio.create_task(live.next(timeout))
    while not live.parked:
        await asyncio.sleep(0)
    return reader


async def test_the_next_event_for_a_parked_follower_is_admitted_without_waking_it() -> None:
    tail = streams.LogTail(session_id="s-1", owner_id=1, after=4)
    live = streams.LiveInbox()
    reader = await parked(live)

    frame = streams.admit_parked(tail, live, event(5), idle_s=30)  # type: ignore[arg-type]

    assert frame is not None and frame["seq"] == 5 and frame["payload"] == {"text": "<5>"}
    assert tail.cursor == 5
    assert live.parked and not reader.done()  # nothing queued, nobody woken
    reader.cancel()


@pytest.mark.parametrize("why", ["gap", "repeat", "not parked", "queued", "run follower", "check"])
async def test_anything_else_goes_through_the_queue(why: str) -> None:
    tail = streams.LogTail(
        session_id="s-1", owner_id=1, after=4, run_id="run-1" if why == "run follower" else None
    )
    live = streams.LiveInbox()
    reader = None if why == "not parked" else await parked(live)
    message: dict[str, Any] = dict(event({"gap": 7, "repeat": 4}.get(why, 5)))
    if why == "queued":
        live.put_nowait(event(5))  # woken already: what follows must queue behind
    if why == "check":
        message = {"type": "stream.check"}

    assert streams.admit_parked(tail, live, message, idle_s=30) is None
    assert tail.cursor == 4
    if reader is not None:
        reader.cancel()


async def test_an_admitted_event_counts_as_traffic_for_the_idle_tick() -> None:
    live = streams.LiveInbox()
    started = time.monotonic()
    reader = await parked(live, timeout=0.3)
    await asyncio.sleep(0.2)
    touched = time.monotonic()
    tail = streams.LogTail(session_id="s-1", owner_id=1, after=0)
    assert streams.admit_parked(tail, live, event(1), idle_s=30) is not None  # type: ignore[arg-type]

    assert await reader is None
    # The quiet time runs from the admitted event, not from the start of the wait.
    assert time.monotonic() - touched >= 0.3
    assert time.monotonic() - started >= 0.5


@contextlib.asynccontextmanager
async def watching(
    credential: Credential, count: int, *, due: bool = False
) -> AsyncIterator[list[streams.CredentialWatch]]:
    """``count`` followers' watches of ``credential`` (``due``: all of them due for a check,
    as followers that connected together are), left at the end."""
    watches = [streams.CredentialWatch(credential, lambda message: None) for _ in range(count)]
    if due:
        for watch in watches:
            watch.checked_at -= 60
    try:
        yield watches
    finally:
        for watch in watches:
            await watch.subscription.leave()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Credential]:
    """Every read of a credential from the database, in order."""
    done: list[Credential] = []
    from accounts.credentials import credential_holds as real

    def counted(credential: Credential) -> bool:
        done.append(credential)
        return real(credential)

    monkeypatch.setattr(credential_watch, "credential_holds", counted)
    credential_watch._confirmed.clear()
    return done


@database_sync_to_async
def token_credential_of(user: Any) -> Credential:
    token, _ = ApiToken.issue(user=user, name="followers")
    return token_credential(token)


async def test_followers_of_one_credential_due_for_a_check_share_one_read(
    user: Any, reads: list[Credential]
) -> None:
    credential = await token_credential_of(user)
    async with watching(credential, 50, due=True) as watches:
        await asyncio.gather(*(watch.check(event(1), idle_s=30) for watch in watches))  # type: ignore[arg-type]
        assert reads == [credential]
        # Confirmed for all of them: the next events need no read, and can be admitted.
        assert all(watch.fresh(30, time.monotonic()) for watch in watches)
        await asyncio.gather(*(watch.check(event(2), idle_s=30) for watch in watches))  # type: ignore[arg-type]
        assert reads == [credential]


async def test_a_change_is_read_again_even_right_after_a_confirmation(
    user: Any, reads: list[Credential]
) -> None:
    credential = await token_credential_of(user)
    async with watching(credential, 10) as watches:
        await watches[0].check(None, idle_s=0)  # an idle tick confirms it
        assert reads == [credential]

        changed = {"type": "credentials.changed", "session": ""}
        await asyncio.gather(*(watch.check(changed, idle_s=30) for watch in watches))  # type: ignore[arg-type]
        assert reads == [credential, credential]  # one more read, shared by all ten


async def test_a_revoked_credential_ends_every_follower_sharing_the_read(
    user: Any, reads: list[Credential]
) -> None:
    credential = await token_credential_of(user)
    async with watching(credential, 10, due=True) as watches:
        await database_sync_to_async(ApiToken.objects.filter(user=user).delete)()
        results = await asyncio.gather(
            *(watch.check(None, idle_s=30) for watch in watches), return_exceptions=True
        )
    assert all(isinstance(result, CredentialRevoked) for result in results)
    assert reads == [credential]
    assert credential not in credential_watch._confirmed
