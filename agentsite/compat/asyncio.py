"""``asyncio.wait_for`` as Python 3.12 has it, on Python 3.11.

Python 3.11's ``wait_for`` runs the awaitable in a task of its own and waits for
it; when the caller is cancelled in the same turn of the loop as that task ends,
it returns the task's result and the cancellation is lost (CPython gh-86296).
Python 3.12 fixed this by running the awaitable under ``asyncio.timeout``, which
is what ``wait_for`` below does.

Every command redis-py 8 sends on an asyncio connection goes through
``wait_for`` (its default 5 s socket timeout bounds the write), so on 3.11 a task
cancelled while it talked to Redis went on running more often than not (100 of
175 such cancels in the test): a turn handed back by a stopping worker, whose
model was polling Redis, kept polling it. ``install`` replaces the function in ``asyncio``
(where redis-py and the project look it up at each call) on Python before 3.12
and does nothing after; ``AgentsiteConfig.ready`` calls it in every process.
Verified against CPython 3.11.7 (and 3.12's ``asyncio/tasks.py``, whose function
this is). Tests: ``tests/compat/test_asyncio.py``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

FIXED_IN = (3, 12)


async def wait_for(fut: Awaitable[T], timeout: float | None) -> T:
    """Wait for ``fut`` for at most ``timeout`` seconds (``None``: no limit); on the
    timeout it is cancelled and TimeoutError raised. A cancellation of the caller is
    never lost, whether or not ``fut`` ends at the same moment."""
    if timeout is not None and timeout <= 0:
        # As 3.12: a future already done gives its result; anything else is
        # cancelled, waited for, and its result taken if it ended before the cancel.
        task = asyncio.ensure_future(fut)
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait({task})
        try:
            return task.result()
        except asyncio.CancelledError as exc:
            raise TimeoutError from exc
    async with asyncio.timeout(timeout):
        return await fut


def install() -> bool:
    """Put ``wait_for`` in ``asyncio`` on a Python that needs it; whether it did."""
    if sys.version_info >= FIXED_IN:
        return False
    module: Any = asyncio
    module.wait_for = wait_for
    module.tasks.wait_for = wait_for
    return True
