"""Many model turns at once on one event loop.

A model turn is almost all waiting: for the model's first token, for its
stream, for a tool. ``TurnRuntime`` runs any number of turns as tasks of one
event loop, so one process serves many conversations without a process (or a
thread) per turn. What cannot wait on the loop goes to two bounded pools:

- the **database pool** (``AGENTSITE_TURN_DB_THREADS`` threads, each keeping
  one connection): every query of every turn, so turns never queue behind one
  thread (asgiref's thread-sensitive default would serialize them all) and a
  worker never holds more connections than the pool has threads;
- the **tool pool** (``AGENTSITE_TURN_TOOL_THREADS``): blocking tools, each
  under its tool's deadline, so a slow tool delays only the turn that called it.

One watcher serves all the turns, and sleeps while there are none: every
``CANCEL_POLL_S`` one read of Redis finds the runs asked to stop (the key
``sessions.runs.run_request_cancel`` sets), and every ``HEARTBEAT_EVERY_S`` one
call to the database beats every running run and finds those interrupted or ended
elsewhere, which the database alone may say (Redis away, or a run failed by the
reaper). Beside it, every running run's key in Redis says it is alive
(``jobs.alive``) while the database is away.

``TurnThread`` runs a runtime on a loop in a thread of its own, for the RQ
worker (``sessions.worker``); ``run_execute`` runs one turn in the calling
thread, for RQ's plain forking worker and in-process tests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis.asyncio
from django.conf import settings
from django.db import connections

from agentsite.core.database import through_database_outage
from agentsite.core.logcontext import log_context_bind, logged_with
from agentsite.core.redis_connections import async_redis_client
from jobs.alive import alive_mark
from jobs.groups import cancel_key
from jobs.registry import get_tool
from sessions.conversation import Conversation, conversation_build
from sessions.loop import HANDED_BACK, TextStreams, Turn
from sessions.models import AgentSession
from sessions.runs import (
    HEARTBEAT_EVERY_S,
    RUN_STALE_AFTER_S,
    Claim,
    run_complete,
    run_fail,
    run_start,
    runs_watch,
)
from sessions.toolbox import tool_execute

log = logging.getLogger(__name__)

CANCEL_POLL_S = 0.2
# How long one look for stop signals may wait on Redis before the watcher goes on.
STOP_SIGNALS_WAIT_S = 1.0
T = TypeVar("T")


def _db_call(fn: Callable[..., T], kwargs: dict[str, Any], close_after: bool) -> T:
    """Run ``fn`` in a pool thread; while the database is away (a restart), wait for it.

    A restart breaks the connection each pool thread keeps, idle or not: the call
    is made again on a new one, so neither the outage nor the broken connections
    it leaves behind fail a turn. Only connection-level errors are retried: the
    transaction they interrupt is rolled back by the server (unless the
    connection breaks during the commit itself, which no client can tell).
    """
    what = f"turn query {getattr(fn, '__name__', 'call')}"
    try:
        return through_database_outage(lambda: fn(**kwargs), what=what)
    finally:
        if close_after:
            connections.close_all()


def _turn_setup(*, claim: Claim) -> tuple[AgentSession, Conversation]:
    """The turn's session (as its claim read it, with its owner) and its conversation."""
    session = claim.session
    return session, conversation_build(session=session, run=claim.run, batch=claim.batch)


def blocking_tool_timeout(name: str) -> float | None:
    """The deadline of a blocking registry tool; None for start_* and the job tools."""
    spec = get_tool(name)
    return spec.default_timeout_s if spec is not None and spec.kind == "blocking" else None


class TurnRuntime:
    def __init__(
        self,
        *,
        db_threads: int | None = None,
        tool_threads: int | None = None,
        close_connections: bool = False,
    ) -> None:
        self.db_pool = concurrent.futures.ThreadPoolExecutor(
            db_threads or settings.AGENTSITE_TURN_DB_THREADS, thread_name_prefix="turn-db"
        )
        self.tool_pool = concurrent.futures.ThreadPoolExecutor(
            tool_threads or settings.AGENTSITE_TURN_TOOL_THREADS, thread_name_prefix="turn-tool"
        )
        # Per-call connections for a short-lived runtime; a worker's pool keeps them.
        self.close_connections = close_connections
        self.turns: dict[str, Turn] = {}
        self.text_streams = TextStreams(settings.AGENTSITE_DELTA_WRITES_PER_S, db=self.db)
        self.handing_back: str | None = None
        self.busy = asyncio.Event()  # set when a turn starts; the watchers wait for it
        self.redis: redis.asyncio.Redis | None = None  # the watcher's, on its loop

    @staticmethod
    def _in_pool(pool: concurrent.futures.Executor, call: Callable[[], T]) -> asyncio.Future[T]:
        """``call`` on any thread of ``pool``, with the caller's context (its log context).

        Nothing run this way calls back into the loop (``async_to_sync``), so asgiref's
        ``sync_to_async`` and its per-call bookkeeping of contexts and threads are not
        needed.
        """
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(pool, context.run, call)

    async def db(self, fn: Callable[..., T], /, **kwargs: Any) -> T:
        """Run a synchronous database function on the pool and await its result."""
        # Any pool thread, so turns never queue behind one.
        call = functools.partial(_db_call, fn, kwargs, self.close_connections)
        result: T = await self._in_pool(self.db_pool, call)
        return result

    async def tool_call(self, *, name: str, **kwargs: Any) -> tuple[Any, bool]:
        """One tool call: blocking tools on the tool pool under their deadline, the rest on
        the database pool (``start_*`` only creates a job, so it stays instant)."""
        timeout = blocking_tool_timeout(name)
        if timeout is None:
            return await self.db(tool_execute, name=name, **kwargs)
        # Tool threads may idle for long: each call closes the connections it opened.
        call = functools.partial(_db_call, tool_execute, {"name": name, **kwargs}, True)
        try:
            return await asyncio.wait_for(self._in_pool(self.tool_pool, call), timeout)
        except TimeoutError:
            # The thread cannot be killed; the tool sees ctx.cancelled at its deadline.
            message = f"{name} did not finish within its {timeout:g}s deadline."
            return {"error": {"code": "tool_timed_out", "message": message}}, True

    @logged_with("run_id")
    async def execute(self, run_id: str) -> str:
        """Execute one run to its end; returns the status it ended in (or ``skipped``)."""
        if self.handing_back is not None:
            return HANDED_BACK  # still queued: not even claimed
        claim = await self.db(run_start, run_id=run_id)
        if claim is None:
            return "skipped"
        log_context_bind(session_id=claim.run.session_id)  # this turn's task only
        try:
            if not claim.batch:
                await self.db(run_complete, run_id=run_id, usage={})
                return "completed"
            session, conversation = await self.db(_turn_setup, claim=claim)
            turn = Turn(runtime=self, session=session, run_id=run_id, conversation=conversation)
            self.turns[run_id] = turn
            self.busy.set()
            if self.handing_back is not None:
                turn.hand_back(self.handing_back)
            try:
                return await turn.execute()
            finally:
                self.turns.pop(run_id, None)
        except BaseException as exc:
            # Whatever happened, the run must not stay "running" and wedge the session.
            await asyncio.shield(
                self.db(
                    run_fail,
                    run_id=run_id,
                    code="internal_error",
                    message=f"The turn crashed: {exc!r}",
                )
            )
            if isinstance(exc, Exception):
                log.exception("run %s crashed", run_id)
                return "failed"
            raise

    async def watch(self) -> None:
        """Beat every running turn's heartbeat; stop the ones interrupted or ended elsewhere."""
        alive = asyncio.create_task(self.alive_watch())
        try:
            await self._watch()
        finally:
            alive.cancel()

    async def alive_watch(self) -> None:
        """Every running turn's key in Redis (``jobs.alive``), beside the heartbeat in the
        database and apart from it: a database outage waits in ``watch``, not here."""
        while True:
            await self.until_busy()
            await asyncio.sleep(HEARTBEAT_EVERY_S)
            run_ids = list(self.turns)
            if run_ids:
                await asyncio.to_thread(alive_mark, "run", run_ids, RUN_STALE_AFTER_S)

    async def until_busy(self) -> None:
        """Return once a turn is running (at once if one is)."""
        while not self.turns:
            self.busy.clear()
            await self.busy.wait()

    async def _watch(self) -> None:
        last_beat = time.monotonic()
        while True:
            if not self.turns:
                await self.until_busy()
                last_beat = time.monotonic()  # the claim of the turn that woke us beat it
            await asyncio.sleep(CANCEL_POLL_S)
            run_ids = list(self.turns)
            if not run_ids:
                continue
            try:
                if time.monotonic() - last_beat >= HEARTBEAT_EVERY_S:
                    last_beat = time.monotonic()
                    stop = await self.db(runs_watch, run_ids=run_ids)
                else:
                    stop = await self.stop_signals(run_ids)
            except Exception:
                log.warning("could not watch %d turns", len(run_ids), exc_info=True)
                continue
            for run_id in stop:
                turn = self.turns.get(run_id)
                if turn is not None:
                    turn.interrupt()

    async def stop_signals(self, run_ids: list[str]) -> set[str]:
        """Those of ``run_ids`` asked to stop, as Redis says; none while Redis is away (the
        database says at the next heartbeat). Read on this loop: no thread, no query."""
        if self.redis is None:
            self.redis = async_redis_client()
        keys = [cancel_key(run_id) for run_id in run_ids]
        try:
            found = await asyncio.wait_for(self.redis.mget(keys), STOP_SIGNALS_WAIT_S)
        except Exception as exc:
            log.debug("could not read the stop signals of %d turns: %s", len(run_ids), exc)
            return set()
        return {run_id for run_id, there in zip(run_ids, found, strict=True) if there is not None}

    async def aclose(self) -> None:
        """Close what the watcher opened on this loop."""
        client, self.redis = self.redis, None
        if client is not None:
            await client.aclose()

    def hand_back_all(self, reason: str) -> None:
        """Abandon every turn (and any about to start) so another worker takes it."""
        self.handing_back = reason
        for turn in list(self.turns.values()):
            turn.hand_back(reason)

    def shutdown(self) -> None:
        self.db_pool.shutdown(wait=False, cancel_futures=True)
        self.tool_pool.shutdown(wait=False, cancel_futures=True)


def run_execute(*, run_id: str) -> str:
    """Execute one run in the calling thread, with a runtime of its own."""
    return asyncio.run(_execute_alone(run_id))


async def _execute_alone(run_id: str) -> str:
    runtime = TurnRuntime(db_threads=2, tool_threads=4, close_connections=True)
    watcher = asyncio.create_task(runtime.watch())
    try:
        return await runtime.execute(run_id)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await runtime.aclose()
        runtime.shutdown()


class TurnThread:
    """A TurnRuntime on an event loop in a thread of its own, fed by a synchronous caller."""

    def __init__(self, runtime: TurnRuntime) -> None:
        self.runtime = runtime
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._closing: asyncio.Event | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._main, name="turn-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._closing = asyncio.Event()
        watcher = asyncio.create_task(self.runtime.watch())
        self._ready.set()
        await self._closing.wait()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await self.runtime.aclose()

    def submit(self, run_id: str) -> concurrent.futures.Future[str]:
        assert self.loop is not None, "start() first"
        return asyncio.run_coroutine_threadsafe(self.runtime.execute(run_id), self.loop)

    def hand_back_all(self, reason: str) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.runtime.hand_back_all, reason)

    def close(self, timeout: float = 10.0) -> None:
        if self.loop is not None and self._closing is not None:
            self.loop.call_soon_threadsafe(self._closing.set)
        if self.thread is not None:
            self.thread.join(timeout)
        self.runtime.shutdown()
