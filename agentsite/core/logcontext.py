"""Which job, run or session a log line concerns: ``job_id=… run_id=… session_id=…``.

The ids live in context variables, so they follow the work and nothing else: a
thread or an asyncio task sees only the ids its own entry point set (each of the
turn worker's turns is a task of its own, and the turn runtime carries them to
its database and tool threads, as ``sync_to_async`` does elsewhere).
``LogContextFilter`` copies them onto every record that passes the console
handler, where the format prints them.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, TypeVar, cast

FIELDS = ("job_id", "run_id", "session_id")
_VARS: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"agentsite_log_{name}", default=None) for name in FIELDS
}

F = TypeVar("F", bound=Callable[..., Any])


def _set(ids: dict[str, Any]) -> list[tuple[str, Token[str | None]]]:
    return [(name, _VARS[name].set(str(value))) for name, value in ids.items() if value]


def _reset(tokens: list[tuple[str, Token[str | None]]]) -> None:
    for name, token in reversed(tokens):
        _VARS[name].reset(token)


@contextmanager
def log_context(**ids: Any) -> Iterator[None]:
    """Log lines inside the block carry ``ids`` (names from ``FIELDS``; None is skipped)."""
    tokens = _set(ids)
    try:
        yield
    finally:
        _reset(tokens)


def log_context_bind(**ids: Any) -> None:
    """Set ``ids`` for the rest of the current task (an asyncio task's context ends with it)."""
    _set(ids)


def logged_with(*names: str) -> Callable[[F], F]:
    """Decorate an entry point: its arguments called ``names`` go into the log context."""

    def decorate(fn: F) -> F:
        params = list(inspect.signature(fn).parameters)
        positions = {name: params.index(name) for name in names}

        def ids_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            return {
                name: kwargs[name] if name in kwargs else args[at] if at < len(args) else None
                for name, at in positions.items()
            }

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                tokens = _set(ids_of(args, kwargs))
                try:
                    return await fn(*args, **kwargs)
                finally:
                    _reset(tokens)

            return cast(F, run_async)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            tokens = _set(ids_of(args, kwargs))
            try:
                return fn(*args, **kwargs)
            finally:
                _reset(tokens)

        return cast(F, run)

    return decorate


class LogContextFilter(logging.Filter):
    """Adds ``job_id``, ``run_id``, ``session_id`` and ``log_context`` (`` [job_id=…]`` or "").

    An id passed in ``extra=`` wins over the context's.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        parts = []
        for name, var in _VARS.items():
            value = getattr(record, name, None) or var.get()
            setattr(record, name, value)
            if value:
                parts.append(f"{name}={value}")
        record.log_context = f" [{' '.join(parts)}]" if parts else ""
        return True
