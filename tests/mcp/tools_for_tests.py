"""Tools for the MCP tests, registered in the test process, the web server and the workers.

``AGENTSITE_EXTRA_TOOLS`` names this module (see tests/mcp/conftest.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from jobs.registry import ToolContext, tool


class Nap(BaseModel):
    seconds: float = Field(1.0, ge=0, le=120)


@tool(
    name="mcp_nap",
    description="Sleeps in tenths of a second, reporting progress; stops when cancelled.",
    input_model=Nap,
    default_timeout_s=60,
    max_timeout_s=180,
)
def mcp_nap(args: Nap, ctx: ToolContext) -> dict[str, Any]:
    steps = max(1, int(args.seconds * 10))
    for step in range(steps):
        ctx.check_cancelled()
        time.sleep(args.seconds / steps)
        ctx.progress((step + 1) / steps, f"napped {step + 1} of {steps}")
    return {"summary": f"napped {args.seconds:g}s", "seconds": args.seconds}


@tool(
    name="mcp_broken",
    description="Always raises.",
    input_model=Nap,
)
def mcp_broken(args: Nap, ctx: ToolContext) -> dict[str, Any]:
    raise RuntimeError("the nap went wrong")


class Hold(BaseModel):
    marker_dir: str
    tag: str


@tool(
    name="mcp_hold",
    description="A blocking tool that holds its thread until its deadline, leaving markers.",
    input_model=Hold,
    kind="blocking",
    default_timeout_s=15,
    max_timeout_s=15,
)
def mcp_hold(args: Hold, ctx: ToolContext) -> dict[str, Any]:
    markers = Path(args.marker_dir)
    (markers / f"{args.tag}.started").touch()
    try:
        while not ctx.cancelled:
            time.sleep(0.05)
    finally:
        (markers / f"{args.tag}.stopped").touch()
    return {"summary": "held until the deadline"}
