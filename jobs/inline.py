"""Blocking tools: validated like a job's arguments, then run inline in the caller's process.

In the web process (the MCP endpoint) they run on a bounded pool of their own
(``AGENTSITE_BLOCKING_TOOL_THREADS``), never on the event loop's default
executor that request handling shares, and the caller is answered at the tool's
deadline whether or not the tool has finished; the tool itself sees
``ctx.cancelled`` then and stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import connections

from jobs.registry import Tool
from jobs.services import tool_args_parse, tool_for_request
from jobs.tools.context import InlineToolContext

T = TypeVar("T")

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class BlockingToolTimedOut(Exception):
    """A blocking tool did not finish within its deadline."""

    def __init__(self, tool: str, timeout_s: float) -> None:
        super().__init__(f"{tool} did not finish within its {timeout_s:g}s deadline.")
        self.tool = tool
        self.timeout_s = timeout_s


def blocking_tool_call(
    *, owner: Any, tool: str, args: dict[str, Any], session_id: str | None = None
) -> Any:
    """Validate and run a blocking tool inline; the tool's own exceptions propagate."""
    spec = tool_for_request(tool, kind="blocking")
    parsed = tool_args_parse(spec, args)
    ctx = InlineToolContext(
        owner_id=getattr(owner, "pk", None), session_id=session_id, timeout_s=spec.default_timeout_s
    )
    return spec.run(parsed, ctx)


def blocking_tool_pool() -> concurrent.futures.ThreadPoolExecutor:
    """This process's threads for blocking tools, made on first use."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                settings.AGENTSITE_BLOCKING_TOOL_THREADS, thread_name_prefix="blocking-tool"
            )
        return _pool


def _in_pool_thread(call: Callable[[], T]) -> T:
    try:
        return call()
    finally:
        connections.close_all()  # pool threads may idle for long; a pooled connection goes back


async def blocking_tool_run(tool: Tool, call: Callable[[], T]) -> T:
    """Await ``call`` (which runs blocking tool ``tool``) on the pool, under its deadline.

    Raises ``BlockingToolTimedOut`` once the tool's ``default_timeout_s`` has
    passed since the call was made, counting any wait for a free thread; a call
    still waiting for one then never starts.
    """
    loop = asyncio.get_running_loop()
    timeout_s = tool.default_timeout_s or None
    deadline = None if timeout_s is None else loop.time() + timeout_s
    future = loop.run_in_executor(blocking_tool_pool(), functools.partial(_in_pool_thread, call))
    try:
        result = await asyncio.wait_for(future, timeout_s)
    except TimeoutError:
        raise BlockingToolTimedOut(tool.name, tool.default_timeout_s or 0.0) from None
    if deadline is not None and loop.time() >= deadline:
        # The tool's own deadline starts when it starts, never before this one: a result
        # that comes now is what it returned on seeing ``cancelled``, not a finished call.
        raise BlockingToolTimedOut(tool.name, tool.default_timeout_s or 0.0)
    return result
