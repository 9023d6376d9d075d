"""Resumable session streams: replay from the log, then tail the live channel.

Both transports — the websocket consumer (``sessions.consumers``) and the
server-sent-event views (``sessions.sse``) — follow a session the same way:

1. join the session's channel-layer group, then wait until a marker sent to
   that group comes back, which proves the subscription is live in Redis;
2. replay every logged event after the client's position;
3. forward live notifications, dropping seqs already delivered and reading any
   seq skipped by the live channel back from the log;
4. end once the credential the follower was opened with no longer holds
   (``CredentialWatch``: prompted by its user's group, re-checked when idle).

Because every event is committed before it is published, anything the replay
did not see is published after the marker and so reaches the live queue: the
client gets each event exactly once and in order, however the two race.

This is the core both edges share: it knows no HTTP. Beside it: ``reads`` (the
log reads, on threads of their own), ``frames`` (each event's frame, signed and
encoded once), ``live_inbox`` (a follower's bounded queue) and
``credential_watch`` (the end of a follower whose credential has gone).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, cast

from accounts.credentials import Credential
from agentsite.core import fanout
from sessions.payloads import LiveMessage, SessionEventMessage, StreamCheckMessage
from sessions.streams.credential_watch import CredentialWatch, credential_check
from sessions.streams.frames import Frame, frame_json, frame_token
from sessions.streams.live_inbox import LIVE_QUEUE_MAX, LiveInbox
from sessions.streams.reads import (
    EventRow,
    events_after,
    log_read,
    run_is_finished,
    run_read,
    session_read,
)

__all__ = [
    "CHECK_MESSAGE",
    "LIVE_QUEUE_MAX",
    "CredentialWatch",
    "EventRow",
    "Frame",
    "LayerFollower",
    "LiveInbox",
    "LogTail",
    "admit_parked",
    "credential_check",
    "events_after",
    "follow",
    "frame_json",
    "log_read",
    "run_is_finished",
    "run_read",
    "session_read",
]

REPLAY_PAGE = 200


class LogTail:
    """A client's position in a session's log (optionally one run's share of it).

    ``cursor`` is the highest session seq the client has been brought past;
    frames come out for each event exactly once, in seq order.
    """

    def __init__(
        self, *, session_id: str, owner_id: int, after: int, run_id: str | None = None
    ) -> None:
        self.session_id = session_id
        self.owner_id = owner_id
        self.cursor = after
        self.run_id = run_id

    def frame(self, event: EventRow | SessionEventMessage) -> Frame:
        seq = int(event["seq"])
        if self.run_id is None:
            token = frame_token("s", self.session_id, self.owner_id, seq)
        else:
            token = frame_token("r", self.run_id, self.owner_id, seq)
        return {"seq": seq, "kind": event["kind"], "payload": event["payload"], "token": token}

    async def replay(self, upto: int | None = None) -> AsyncIterator[Frame]:
        """Frames for the logged events after the cursor (up to ``upto``), page by page."""
        while True:
            rows = await events_after(
                session_id=self.session_id,
                after=self.cursor,
                upto=upto,
                run_id=self.run_id,
                limit=REPLAY_PAGE,
            )
            for row in rows:
                self.cursor = row["seq"]
                yield self.frame(row)
            if len(rows) < REPLAY_PAGE:
                if upto is not None:
                    self.cursor = max(self.cursor, upto)
                return

    async def admit(self, message: SessionEventMessage) -> AsyncIterator[Frame]:
        """Frames for one live notification: none if already delivered, the gap first if any."""
        seq = int(message["seq"])
        if seq <= self.cursor:
            return
        if seq > self.cursor + 1:
            async for frame in self.replay(upto=seq):
                yield frame
            return
        self.cursor = seq
        if self.run_id is None or message.get("run_id") == self.run_id:
            yield self.frame(message)


CHECK_MESSAGE: StreamCheckMessage = {"type": fanout.CHECK_TYPE}


def admit_parked(
    tail: LogTail,
    live: LiveInbox,
    message: dict[str, Any],
    idle_s: float,
    watch: CredentialWatch | None = None,
) -> Frame | None:
    """The frame for ``message`` if it can go out now, from the feed's delivery, without
    waking the follower; None if the message must go through ``live`` (``follow``).

    That holds for the next event of the log, for a follower caught up and
    parked in ``live`` with nothing queued, whose credential was checked less
    than ``idle_s`` ago: ``follow`` would do nothing else with it than yield its
    frame. A feed delivering to thousands of followers so writes each frame in
    one loop, instead of waking thousands of tasks. The caller sends the frame
    before anything else it sends (the cursor has moved past it).
    """
    if message["type"] != "session.event" or tail.run_id is not None or not live.parked:
        return None
    seq = int(message["seq"])
    if seq != tail.cursor + 1:
        return None
    now = time.monotonic()
    if watch is not None and not watch.fresh(idle_s, now):
        return None
    tail.cursor = seq
    live.touch(now)
    return tail.frame(cast(SessionEventMessage, message))


async def follow(
    tail: LogTail,
    live: LiveInbox,
    subscription: fanout.Subscription,
    idle_s: float,
    watch: CredentialWatch | None = None,
) -> AsyncIterator[Frame | None]:
    """Replay, then live. ``live`` receives the group's messages from ``subscription`` on.

    Yields ``None`` once caught up with the log and after each ``idle_s`` without
    traffic (a heartbeat); an idle follower re-reads the log, so a notification
    lost by Redis costs latency, never data. With a ``watch``, raises
    CredentialRevoked once the follower's credential no longer holds.
    """
    if watch is None:
        await subscription.ready()
    else:
        await asyncio.gather(subscription.ready(), watch.subscription.ready())
    async for frame in tail.replay():
        yield frame
    yield None  # caught up
    while True:
        message = await live.next(idle_s)
        if watch is not None:
            await watch.check(message, idle_s)
        if message is None:
            yield None
            message = CHECK_MESSAGE
        if message["type"] == "stream.check":
            async for frame in tail.replay():
                yield frame
        elif message["type"] == "session.event":
            async for frame in tail.admit(message):
                yield frame


class LayerFollower:
    """A session group's live messages, from the process's shared feed, in a bounded queue.

    With a ``credential``, its user's ``credentials.changed`` messages too (``watch``).
    """

    def __init__(self, group: str, credential: Credential | None = None) -> None:
        self.group = group
        self.credential = credential
        self.queue = LiveInbox(LIVE_QUEUE_MAX)
        self.overflowed = False
        self.watch: CredentialWatch | None = None

    async def __aenter__(self) -> LayerFollower:
        self.subscription = fanout.join(self.group, self.put)
        if self.credential is not None:
            self.watch = CredentialWatch(self.credential, self.put)
        return self

    def put(self, message: dict[str, Any]) -> None:
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(cast(LiveMessage, message))
        except asyncio.QueueFull:
            self.overflowed = True

    async def __aexit__(self, *exc: object) -> None:
        await self.subscription.leave()
        if self.watch is not None:
            await self.watch.subscription.leave()
