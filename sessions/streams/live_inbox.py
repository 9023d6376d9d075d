"""A follower's live messages, in a queue light enough to keep one per open socket."""

from __future__ import annotations

import asyncio
import time

from sessions.payloads import LiveMessage

# Live notifications a follower may hold before it counts as too slow; it is
# then cut off and resumes from its last token instead of growing in memory.
LIVE_QUEUE_MAX = 1000


class LiveInbox:
    """A follower's live messages: a bounded queue for one reader, light enough to keep
    one per open socket.

    ``asyncio.Queue`` keeps three deques and an Event (docs/benchmarks.md,
    "Single operations"); a follower needs a list and, while it waits, one
    future. ``put_nowait`` raises ``asyncio.QueueFull`` once ``maxsize`` messages
    wait, as a Queue would.
    """

    __slots__ = ("_head", "_items", "_timer", "_touched_at", "_waiter", "maxsize")

    def __init__(self, maxsize: int = LIVE_QUEUE_MAX) -> None:
        self._items: list[LiveMessage] = []
        self._head = 0
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._touched_at = 0.0
        self.maxsize = maxsize

    def qsize(self) -> int:
        return len(self._items) - self._head

    def empty(self) -> bool:
        return self._head == len(self._items)

    @property
    def parked(self) -> bool:
        """Whether the reader is waiting in ``next()`` and nothing is queued or on its way."""
        waiter = self._waiter
        return waiter is not None and not waiter.done() and self.empty()

    def touch(self, now: float) -> None:
        """Count traffic that went past the queue at ``now`` (``admit_parked``): the
        reader's ``next()`` times out ``timeout`` after the last message or touch."""
        self._touched_at = now

    def put_nowait(self, message: LiveMessage) -> None:
        if self.qsize() >= self.maxsize:
            raise asyncio.QueueFull
        self._items.append(message)
        if self._waiter is not None:
            _wake(self._waiter)

    def get_nowait(self) -> LiveMessage:
        if self.empty():
            raise asyncio.QueueEmpty
        message = self._items[self._head]
        self._head += 1
        if self._head == len(self._items):
            self._items.clear()
            self._head = 0
        return message

    async def next(self, timeout: float) -> LiveMessage | None:
        """The next message, or None after ``timeout`` seconds without one.

        One timer handle while it waits, not ``asyncio.timeout``'s scope object
        and handle (nor ``wait_for``'s task) per follower and wait.
        """
        if self.empty():
            await self._wait(timeout)
            if self.empty():
                return None
        return self.get_nowait()

    async def _wait(self, timeout: float) -> None:
        if self._waiter is not None:
            raise RuntimeError("a LiveInbox has one reader")
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        self._timer = loop.call_later(timeout, self._expire, timeout)
        try:
            await waiter
        finally:
            self._waiter = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _expire(self, timeout: float) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        remaining = self._touched_at + timeout - time.monotonic()
        if remaining > 0:  # touched meanwhile: the quiet time starts from the touch
            self._timer = asyncio.get_running_loop().call_later(remaining, self._expire, timeout)
            return
        self._timer = None
        waiter.set_result(None)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
