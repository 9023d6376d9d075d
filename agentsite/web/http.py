"""What the apps' HTTP edges share: the error format, request bodies, text patterns.

Every error body is ``{"error": {"code", "message", "details"?}}``: a machine
readable code, a sentence for people, and optional structured details.
"""

from __future__ import annotations

import json
from typing import Any, Self

from django.http import HttpRequest
from ninja import Schema
from ninja.parser import Parser
from pydantic import ConfigDict, model_validator


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


# How deeply a JSON body may nest. Far more than any request of the APIs needs (a
# tool's JSON schema included), and far less than Python's recursion limit, which a
# recursive walk of a deeper value (a validator, an encoder, a database adapter)
# would hit and fail with.
MAX_JSON_DEPTH = 100


class NestedTooDeep(Exception):
    """A JSON body nested deeper than ``MAX_JSON_DEPTH``."""

    code = "nested_too_deep"
    message = f"The JSON body is nested deeper than {MAX_JSON_DEPTH} levels; send flatter JSON."


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when arrays and objects in ``value`` nest more than ``limit`` levels (iterative)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def json_body(raw: bytes) -> Any:
    """The parsed body; ``NestedTooDeep`` before anything walks a value nested too deeply.

    ``ValueError`` (``UnicodeDecodeError`` included) for a body that is no JSON.
    """
    try:
        data = json.loads(raw)
    except RecursionError as exc:  # the decoder's own bound, deeper still than ours
        raise NestedTooDeep from exc
    if nested_deeper_than(data, MAX_JSON_DEPTH):
        raise NestedTooDeep
    return data


class BoundedJsonParser(Parser):
    """Ninja's JSON parser, refusing a body nested deeper than ``MAX_JSON_DEPTH``.

    Ninja answers any parse failure with an ``HttpError(400)`` whose cause is the
    parser's exception; ``agentsite.api`` tells ``NestedTooDeep`` apart by it.
    """

    def parse_body(self, request: HttpRequest) -> Any:
        return json_body(request.body)


def contains_nul(value: Any) -> bool:
    """True when a NUL character is in ``value``, a string or any string inside it (iterative)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


class Body(Schema):
    """A JSON request body: unknown fields are refused, and so is text with a NUL
    character in it (422).

    PostgreSQL stores no NUL in text or JSON, so such a body would fail deep in
    the write; SQLite would take it. Refusing it here answers the same on both.
    The check runs on the validated fields: a ``before`` validator of a ninja
    ``Schema`` may be handed ninja's attribute getter instead of the request's dict.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def has_no_nul_characters(self) -> Self:
        if contains_nul([getattr(self, name) for name in type(self).model_fields]):
            raise ValueError("text may not contain NUL (U+0000) characters")
        return self


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}
