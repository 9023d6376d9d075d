"""The domain's refusals: plain exceptions with a stable code and a sentence.

Services raise them; each edge says them in its own language: the REST API
maps the class to an HTTP status in one table (``agentsite.api.STATUS``), MCP to
JSON-RPC errors, the agent's toolbox to a tool error the model reads, the
admin to a message. No domain module knows an HTTP status.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A request the domain refuses: ``code`` for programs, ``message`` for people."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class NotFound(DomainError):
    """No such thing for this caller (another user's things included)."""

    def __init__(self, message: str = "Not found.", details: Any = None) -> None:
        super().__init__("not_found", message, details)


class BadRequest(DomainError):
    """The request is malformed (a cursor, a token, a header)."""


class Invalid(DomainError):
    """The request is well-formed but its content is refused (a tool, its arguments)."""


class Conflict(DomainError):
    """Not possible in the thing's present state (a result before the job is done)."""


class QuotaExceeded(DomainError):
    """The caller is over one of its limits; ``retry_after_s`` says when to try again."""

    def __init__(self, message: str, details: Any = None, *, retry_after_s: int = 1) -> None:
        super().__init__("quota_exceeded", message, details)
        self.retry_after_s = retry_after_s
