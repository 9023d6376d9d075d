"""The tool registry: every tool is declared once, here or from another app.

A tool has a name, a description, a pydantic input model (its JSON schema is
what models and MCP clients see), a kind, timeouts and a ``run(args, ctx)``
function. ``blocking`` tools are fast reads that run inline; ``async`` tools
run as jobs in a tool worker and report through their context.
"""

from __future__ import annotations

import copy
import functools
import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from django.conf import settings
from pydantic import BaseModel

if TYPE_CHECKING:
    from jobs.hooks import TextModel


class ToolCancelled(Exception):
    """Raised by ``ctx.check_cancelled()`` once the job was asked to stop."""


class ToolContext(Protocol):
    """What a running tool may use. Implemented in ``jobs.tools.context``."""

    job_id: str | None
    owner_id: int | None
    session_id: str | None
    deadline: datetime | None
    logger: logging.Logger

    def progress(self, fraction: float | None, message: str = "") -> None:
        """Report progress; throttled, so calling it often is cheap."""

    def partial(self, item: Any) -> int:
        """Append a partial result and return its index (the result cursor)."""

    @property
    def cancelled(self) -> bool:
        """True once cancellation or the deadline was signalled."""

    def check_cancelled(self) -> None:
        """Raise ToolCancelled when ``cancelled`` is true."""

    def model(self) -> TextModel | None:
        """The model of the job's session, for tools that write prose; None without one."""


ToolKind = Literal["blocking", "async"]
# Whether a call an agent makes in a model turn waits for its user's approval
# (``sessions.approvals``). Calls a person makes directly are never gated.
ToolApproval = Literal["never", "always"]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_model: type[BaseModel]
    run: Callable[[Any, ToolContext], Any]
    kind: ToolKind = "async"
    default_timeout_s: float = 300.0
    max_timeout_s: float = 3600.0
    # One line for completion events: summary(result) -> "412 passed, 3 failed".
    summarize: Callable[[Any], str] | None = None
    approval: ToolApproval = "never"

    def input_schema(self) -> dict[str, Any]:
        # Every model turn offers every tool: the schema is generated once per
        # process, and each caller gets a copy of its own to keep.
        return copy.deepcopy(_json_schema(self.input_model))

    def validate(self, args: dict[str, Any]) -> BaseModel:
        """Parse raw arguments; raises pydantic.ValidationError."""
        return self.input_model.model_validate(args)

    def summary(self, result: Any) -> str:
        if self.summarize is not None:
            return self.summarize(result)
        if isinstance(result, dict) and isinstance(result.get("summary"), str):
            return str(result["summary"])
        return ""


@functools.cache
def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


_TOOLS: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    if tool.name in _TOOLS and _TOOLS[tool.name] is not tool:
        raise ValueError(f"a tool named {tool.name!r} is already registered")
    _TOOLS[tool.name] = tool
    return tool


def tool(
    *,
    name: str,
    description: str,
    input_model: type[BaseModel],
    kind: ToolKind = "async",
    default_timeout_s: float = 300.0,
    max_timeout_s: float = 3600.0,
    summarize: Callable[[Any], str] | None = None,
    approval: ToolApproval = "never",
) -> Callable[[Callable[[Any, ToolContext], Any]], Tool]:
    """Decorator form: ``@tool(name=..., description=..., input_model=...)``."""

    def decorate(run: Callable[[Any, ToolContext], Any]) -> Tool:
        return register(
            Tool(
                name=name,
                description=description,
                input_model=input_model,
                run=run,
                kind=kind,
                default_timeout_s=default_timeout_s,
                max_timeout_s=max_timeout_s,
                summarize=summarize,
                approval=approval,
            )
        )

    return decorate


def get_tool(name: str) -> Tool | None:
    load_builtin_tools()
    return _TOOLS.get(name)


def all_tools() -> list[Tool]:
    load_builtin_tools()
    return sorted(_TOOLS.values(), key=lambda t: t.name)


BUILTIN_TOOL_MODULES = (
    "jobs.tools.clock",
    "jobs.tools.crawl_site",
    "jobs.tools.files",
    "jobs.tools.http_get",
    "jobs.tools.run_tests",
    "jobs.tools.write_report",
)


def load_builtin_tools() -> None:
    """Import the modules that register tools: the built-in ones and ``AGENTSITE_EXTRA_TOOLS``."""
    for module in (*BUILTIN_TOOL_MODULES, *settings.AGENTSITE_EXTRA_TOOLS):
        importlib.import_module(module)
