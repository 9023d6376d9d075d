"""Tools for the agent-loop tests and benchmark, registered in tests and in workers.

``gated`` runs until a test opens its gate, so a test can decide exactly when
a job finishes without timing anything.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from django.conf import settings
from pydantic import BaseModel, Field

from jobs.registry import ToolContext, tool


class Gate(BaseModel):
    gate: str = Field(min_length=1, max_length=100)


class Pause(BaseModel):
    seconds: float = Field(0.4, ge=0, le=30)


def gate_key(gate: str) -> str:
    return f"{settings.REDIS_PREFIX}:test-gate:{gate}"


def gate_open(gate: str) -> None:
    redis.Redis.from_url(settings.REDIS_URL).set(gate_key(gate), "1", ex=3600)


@tool(
    name="gated",
    description="Waits until its gate is opened, then reports.",
    input_model=Gate,
    default_timeout_s=120,
    max_timeout_s=300,
)
def gated(args: Gate, ctx: ToolContext) -> dict[str, Any]:
    conn = redis.Redis.from_url(settings.REDIS_URL)
    while not conn.exists(gate_key(args.gate)):
        ctx.check_cancelled()
        time.sleep(0.05)
    return {"summary": f"gate {args.gate} opened", "detail": "x" * 5000}


@tool(
    name="pause_read",
    description="A blocking read that takes a while.",
    input_model=Pause,
    kind="blocking",
    default_timeout_s=30,
)
def pause_read(args: Pause, ctx: ToolContext) -> dict[str, Any]:
    started = time.monotonic()
    time.sleep(args.seconds)
    return {"summary": f"paused {args.seconds:g}s", "started": started, "ended": time.monotonic()}


@tool(
    name="broken_read",
    description="A blocking read that always raises.",
    input_model=Pause,
    kind="blocking",
)
def broken_read(args: Pause, ctx: ToolContext) -> dict[str, Any]:
    time.sleep(args.seconds)
    raise OSError("the disk is on fire")


@tool(
    name="overdue_read",
    description="A blocking read that outlives its half-second deadline.",
    input_model=Pause,
    kind="blocking",
    default_timeout_s=0.5,
    max_timeout_s=0.5,
)
def overdue_read(args: Pause, ctx: ToolContext) -> dict[str, Any]:
    time.sleep(args.seconds)
    return {"summary": "answered late"}
