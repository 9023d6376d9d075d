"""Small pieces every built-in tool uses: parsing its input, waiting, time left."""

from __future__ import annotations

import os
import time
from typing import Any, TypeVar

from django.conf import settings
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


def tool_setting(name: str, default: str) -> str:
    """A tool setting: the Django setting when defined, else the environment variable."""
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name) or default
    return str(value)


def seconds_left(ctx: ToolContext) -> float | None:
    if ctx.deadline is None:
        return None
    return (ctx.deadline - timezone.now()).total_seconds()


def stop_requested(ctx: ToolContext) -> bool:
    """Cancellation asked for or the deadline passed: the context signals both.

    The tools do not compare the deadline themselves: the job runner tells a
    deadline from a cancel request by what it signalled, and a tool that stopped
    on its own reading of the clock would be recorded as cancelled.
    """
    return ctx.cancelled


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
