"""Small tools for the job tests and the benchmark, registered like any other tool.

Workers import this module when ``AGENTSITE_EXTRA_TOOLS`` names it (see
tests/jobs/conftest.py), so the same tools exist in the test process and in
every work horse.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import django_rq
from pydantic import BaseModel, Field

from jobs.registry import ToolContext, tool


class NoArgs(BaseModel):
    pass


class Sleep(BaseModel):
    seconds: float = Field(5.0, ge=0, le=120)
    steps: int = Field(10, ge=1, le=1000)


class Chat(BaseModel):
    updates: int = Field(500, ge=1, le=100_000)
    items: int = Field(3, ge=0, le=1000)


@tool(name="noop", description="Does nothing, at once.", input_model=NoArgs)
def noop(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"summary": "nothing to do"}


@tool(
    name="sleepy",
    description="Sleeps in steps, one partial result per step; stops when cancelled.",
    input_model=Sleep,
    default_timeout_s=60,
    max_timeout_s=120,
)
def sleepy(args: Sleep, ctx: ToolContext) -> dict[str, Any]:
    for step in range(args.steps):
        ctx.check_cancelled()
        time.sleep(args.seconds / args.steps)
        ctx.partial({"step": step})
        ctx.progress((step + 1) / args.steps, f"step {step + 1} of {args.steps}")
    return {"summary": f"slept {args.seconds:g}s in {args.steps} steps", "steps": args.steps}


@tool(
    name="stubborn",
    description="Ignores cancellation and swallows every exception until the time is up.",
    input_model=Sleep,
    default_timeout_s=60,
    max_timeout_s=120,
)
def stubborn(args: Sleep, ctx: ToolContext) -> dict[str, Any]:
    until = time.monotonic() + args.seconds
    while time.monotonic() < until:
        try:
            time.sleep(0.05)
        except BaseException:
            pass
    return {"summary": "outlasted everyone"}


@tool(
    name="chatty",
    description="Reports progress far more often than anyone should see it.",
    input_model=Chat,
)
def chatty(args: Chat, ctx: ToolContext) -> dict[str, Any]:
    for i in range(args.items):
        ctx.partial({"item": i})
    for i in range(args.updates):
        ctx.progress((i + 1) / args.updates, f"update {i + 1}")
    return {"summary": f"{args.updates} updates, {args.items} items"}


@tool(name="whoami", description="The process that runs it.", input_model=NoArgs)
def whoami(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"summary": "here", "pid": os.getpid(), "ppid": os.getppid()}


@tool(
    name="leaves_a_thread",
    description="Returns at once and leaves a thread running behind it.",
    input_model=NoArgs,
)
def leaves_a_thread(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    threading.Thread(target=time.sleep, args=(600,), name="left-behind", daemon=True).start()
    return {"summary": "left a thread", "pid": os.getpid()}


@tool(name="failing", description="Always raises.", input_model=NoArgs)
def failing(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    raise RuntimeError("the tool broke")


@tool(name="clock", description="A blocking tool: the time.", input_model=NoArgs, kind="blocking")
def clock(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"summary": "tick", "monotonic": time.monotonic()}


def raw_noop() -> None:
    """A plain RQ function that does nothing: the benchmark's baseline."""


def raw_wait_while(key: str, limit_s: float = 600) -> None:
    """A plain RQ function that keeps its worker busy while ``key`` exists in Redis (at
    most ``limit_s``): deleting the key, or flushing Redis, lets the worker go."""
    connection = django_rq.get_connection("default")
    until = time.monotonic() + limit_s
    while connection.exists(key) and time.monotonic() < until:
        time.sleep(0.05)
