"""What the apps' HTTP edges share: the error format, request bodies, text patterns.

Every error body is ``{"error": {"code", "message", "details"?}}``: a machine
readable code, a sentence for people, and optional structured details.
"""

from __future__ import annotations

from typing import Any

from ninja import Schema
from pydantic import model_validator


class ErrorDetail(Schema):
    code: str
    message: str
    details: Any = None


class ErrorBody(Schema):
    """Every error answer: ``{"error": {"code", "message", "details"?}}``."""

    error: ErrorDetail


# Every operation can answer these: no or a bad token (401), a failure nobody
# expected (500), Redis or the database away for a moment (503).
ALWAYS = (401, 500, 503)
# A browser's cookie-authenticated POST, PUT, PATCH or DELETE must carry a CSRF
# token (403 without it); Django reads a POST's form body for that token, and
# refuses one above AGENTSITE_MAX_BODY_BYTES (413).
UNSAFE_METHOD_ERRORS = {
    "post": (403, 413),
    "put": (403, 413),
    "patch": (403, 413),
    "delete": (403,),
}


def errors(*codes: int) -> dict[int, type[ErrorBody]]:
    """The documented error answers of an operation: ``codes`` plus ``ALWAYS``.

    The answers its method brings (``UNSAFE_METHOD_ERRORS``) are added to the
    document by ``AgentsiteApi``, which knows the method.
    """
    return {code: ErrorBody for code in sorted({*codes, *ALWAYS})}


# Python's whitespace (what ``str.strip`` removes) as a regular-expression class
# that reads the same in Python and in JSON Schema's ECMA-262 dialect, whose
# ``\s`` differs from Python's. Patterns in the document use these, so that the
# document refuses exactly the blank values the API refuses.
SPACE = r"[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
NOT_BLANK = SPACE.replace("[", "[^", 1)


def contains_nul(value: Any) -> bool:
    """True when a NUL character is in ``value``, a string or any string inside it."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(contains_nul(k) or contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(contains_nul(item) for item in value)
    return False


class Body(Schema):
    """A JSON request body. Text with a NUL character in it is refused (422).

    PostgreSQL stores no NUL in text or JSON, so such a body would fail deep in
    the write; SQLite would take it. Refusing it here answers the same on both.
    """

    @model_validator(mode="before")
    @classmethod
    def has_no_nul_characters(cls, data: Any) -> Any:
        if contains_nul(data):
            raise ValueError("text may not contain NUL (U+0000) characters")
        return data


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}
