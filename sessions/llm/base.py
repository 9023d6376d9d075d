"""The model-client interface and the items a stream yields."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol


class ModelError(Exception):
    """The model call failed (API error, bad response, network)."""

    def __init__(self, message: str, *, code: str = "model_error") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Finish:
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict)


StreamItem = TextDelta | ToolUse | Finish


class ModelClient(Protocol):
    name: str

    def stream(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[StreamItem]:
        """Yield text deltas and tool calls as they arrive, then exactly one Finish."""
        ...


def approx_tokens(value: Any) -> int:
    """A cheap token estimate (about four characters a token) for budgets and latency."""
    if isinstance(value, str):
        return (len(value) + 3) // 4
    if isinstance(value, dict):
        return sum(approx_tokens(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(approx_tokens(v) for v in value)
    return approx_tokens(str(value)) if value is not None else 0
