"""Small pieces every built-in tool uses: parsing its input, waiting, time left."""

from __future__ import annotations

import time
from typing import Any, TypeVar

from django.utils import timezone
from pydantic import BaseModel

from jobs.registry import ToolCancelled, ToolContext

InputT = TypeVar("InputT", bound=BaseModel)


def tool_input(model: type[InputT], args: Any) -> InputT:
    """Accept the validated model or the raw arguments, whichever the caller passes."""
    if isinstance(args, model):
        return args
    if isinstance(args, BaseModel):
        args = args.model_dump()
    return model.model_validate(args)


def seconds_left(ctx: ToolContext) -> float | None:
    if ctx.deadline is None:
        return None
    return (ctx.deadline - timezone.now()).total_seconds()


def stop_requested(ctx: ToolContext) -> bool:
    """Cancellation asked for, or the deadline passed (whether or not it was signalled yet)."""
    left = seconds_left(ctx)
    return ctx.cancelled or (left is not None and left <= 0)


def sleep_unless_cancelled(ctx: ToolContext, seconds: float, step: float = 0.05) -> None:
    """Sleep, waking often enough to raise ToolCancelled promptly."""
    end = time.monotonic() + seconds
    while True:
        if stop_requested(ctx):
            raise ToolCancelled()
        remaining = end - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(step, remaining))
