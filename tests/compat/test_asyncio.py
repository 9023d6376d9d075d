"""agentsite.compat.asyncio: a cancellation is never lost in ``wait_for``, nor in Redis."""

from __future__ import annotations

import asyncio
import sys

import pytest

from agentsite.compat import asyncio as compat_asyncio
from agentsite.core.redis_connections import async_redis_client


def test_every_process_of_the_app_waits_with_the_fixed_wait_for() -> None:
    # AgentsiteConfig.ready installed it when Django set up this process.
    if sys.version_info < compat_asyncio.FIXED_IN:
        assert asyncio.wait_for is compat_asyncio.wait_for
        assert asyncio.tasks.wait_for is compat_asyncio.wait_for
    else:
        assert asyncio.wait_for is not compat_asyncio.wait_for
        assert compat_asyncio.install() is False


async def test_a_cancel_in_the_turn_the_awaited_future_ends_is_not_lost() -> None:
    # Python 3.11's own wait_for returns the future's result here and the caller
    # goes on as if it had never been cancelled.
    inner: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    went_on = asyncio.Event()

    async def caller() -> None:
        await asyncio.wait_for(inner, 10)
        went_on.set()
        await asyncio.sleep(10)

    task = asyncio.create_task(caller())
    await asyncio.sleep(0)  # the caller now waits for ``inner``
    inner.set_result("ended")
    assert task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not went_on.is_set()


async def test_wait_for_keeps_its_results_and_timeouts() -> None:
    async def answer(delay: float) -> str:
        await asyncio.sleep(delay)
        return "answer"

    assert await asyncio.wait_for(answer(0), None) == "answer"
    assert await asyncio.wait_for(answer(0.01), 5) == "answer"

    slow = asyncio.ensure_future(answer(10))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(slow, 0.01)
    assert slow.cancelled()

    done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    done.set_result("already")
    assert await asyncio.wait_for(done, 0) == "already"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(answer(1), 0)

    async def fails() -> None:
        raise ValueError("from inside")

    with pytest.raises(ValueError, match="from inside"):
        await asyncio.wait_for(fails(), 5)


async def test_a_task_cancelled_during_a_redis_command_ends_cancelled() -> None:
    # redis-py 8 sends every command under wait_for. With Python 3.11's, more than
    # half of these cancels were lost: the command returned and the task went on.
    client = async_redis_client()
    try:
        await client.exists("compat-asyncio-nothing")
        accepted = lost = 0
        for i in range(300):
            task: asyncio.Task[int] = asyncio.ensure_future(client.exists("compat-asyncio-nothing"))
            for _ in range(i % 12):  # cancel at every stage of the command
                await asyncio.sleep(0)
            if not task.cancel():
                continue  # it had already ended
            accepted += 1
            try:
                await task
            except asyncio.CancelledError:
                continue
            lost += 1
        assert accepted > 100
        assert lost == 0, f"{lost} of {accepted} cancels were lost"
    finally:
        await client.aclose()
