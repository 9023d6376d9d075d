"""Blocking tools: validated like a job's arguments, then run inline in the caller's process."""

from __future__ import annotations

from typing import Any

from jobs.services import tool_args_parse, tool_for_request
from jobs.tools.context import InlineToolContext


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
