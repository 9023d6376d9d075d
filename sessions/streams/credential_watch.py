"""The end of a follower whose credential no longer holds, its re-reads shared by the
process's followers (``accounts.credentials`` says what ends one)."""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from typing import cast

from accounts.credentials import (
    Credential,
    CredentialRevoked,
    CredentialsChangedMessage,
    credential_holds,
    credentials_group,
)
from agentsite.core import fanout
from agentsite.core.database import DATABASE_AWAY
from sessions.payloads import LiveMessage
from sessions.streams.reads import log_read


@log_read
def credential_read(credential: Credential) -> bool:
    return credential_holds(credential)


# What this process last learnt of each credential, shared by all its followers:
# when a read found it holding. Thousands of followers opened with one API token
# (or one login) re-check it once per ``idle_s``, not once each.
_confirmed: dict[Credential, float] = {}
CONFIRMED_MAX = 10_000
# Reads under way, per event loop, by (credential, the credentials.changed message
# that prompted them or None): followers that need the same answer wait for one read.
# A message's read is shared only by those that got that message, so none of them
# can be answered by a read begun before the change it announces.
_flights: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[Credential, int], tuple[object, asyncio.Future[bool]]]
] = weakref.WeakKeyDictionary()


async def credential_check(credential: Credential, cause: object | None = None) -> bool:
    """Whether ``credential`` still holds, read once for every follower asking at the
    same time (for the same ``cause``)."""
    flights = _flights.setdefault(asyncio.get_running_loop(), {})
    key = (credential, id(cause))
    flight = flights.get(key)
    if flight is None:
        future = asyncio.ensure_future(credential_read(credential))
        # The entry keeps ``cause`` alive, so its id names no other message meanwhile.
        flights[key] = flight = (cause, future)
        future.add_done_callback(lambda _: flights.pop(key, None))
        future.add_done_callback(functools.partial(_confirm, credential, time.monotonic()))
    return await asyncio.shield(flight[1])


def _confirm(credential: Credential, asked_at: float, future: asyncio.Future[bool]) -> None:
    if future.cancelled() or future.exception() is not None or not future.result():
        _confirmed.pop(credential, None)
        return
    if len(_confirmed) >= CONFIRMED_MAX:
        _confirmed.clear()
    _confirmed[credential] = max(asked_at, _confirmed.get(credential, asked_at))


class CredentialWatch:
    """Ends a follower whose credential no longer holds (see ``accounts.credentials``).

    The follower's queue also gets its user's ``credentials.changed`` messages;
    each prompts a re-read of the credential. The follower's idle ticks and, on a
    busy stream, the first message after ``idle_s`` without a check prompt one
    too, unless another follower of this process had it confirmed meanwhile.
    """

    def __init__(self, credential: Credential, deliver: fanout.Deliver) -> None:
        self.credential = credential
        self.subscription = fanout.join(credentials_group(credential.user_id), deliver)
        self.checked_at = time.monotonic()

    def fresh(self, idle_s: float, now: float) -> bool:
        """Whether the credential was confirmed less than ``idle_s`` ago, by this follower
        or another of this process."""
        if now - self.checked_at < idle_s:
            return True
        confirmed = _confirmed.get(self.credential)
        if confirmed is not None and now - confirmed < idle_s:
            self.checked_at = confirmed
            return True
        return False

    async def check(self, message: LiveMessage | None, idle_s: float) -> None:
        """Raise CredentialRevoked if ``message`` (None: an idle tick) shows it has gone."""
        changed = message is not None and message["type"] == "credentials.changed"
        if changed and self.credential.ended_by(cast(CredentialsChangedMessage, message)):
            raise CredentialRevoked()
        now = time.monotonic()
        if not changed and self.fresh(idle_s, now):
            return
        try:
            holds = await credential_check(self.credential, message if changed else None)
        except DATABASE_AWAY:
            return  # the database is away: the next tick asks again
        self.checked_at = now
        if not holds:
            raise CredentialRevoked()
