"""The OpenAPI document tells what each operation can answer, errors and streams included."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.models import Event

pytestmark = pytest.mark.django_db

ERROR_REF = "#/components/schemas/ErrorBody"


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if path.startswith("/api/")
    ]


def error_schema(op: dict[str, Any], status: str) -> str | None:
    response = op["responses"].get(status)
    if response is None:
        return None
    ref: str | None = response["content"]["application/json"]["schema"].get("$ref")
    return ref


def test_every_operation_documents_its_error_answers(client: Any) -> None:
    # Before: the sessions and runs operations documented none of their errors,
    # and the error body was an untyped object.
    doc = client.get("/api/openapi.json").json()
    assert doc["components"]["schemas"]["ErrorDetail"]["required"] == ["code", "message"]
    for method, path, op in operations(doc):
        for status in ("401", "500", "503"):
            assert error_schema(op, status) == ERROR_REF, (method, path, status)
        if "{" in path:  # takes an id: someone else's or an unknown one is a 404
            assert error_schema(op, "404") == ERROR_REF, (method, path)
    messages = doc["paths"]["/api/sessions/{session_id}/messages"]["post"]["responses"]
    assert {"202", "400", "404", "413", "422"} <= set(messages)


def test_the_stream_operations_describe_their_events(client: Any) -> None:
    # Before: the events were "a string".
    doc = client.get("/api/openapi.json").json()
    for path in ("/api/sessions/{session_id}/stream", "/api/runs/{run_id}/stream"):
        media = doc["paths"][path]["get"]["responses"]["200"]["content"]["text/event-stream"]
        event = media["x-sse-event"]
        assert event["required"] == ["id", "data"]
        frame = event["properties"]["data"]["contentSchema"]
        assert frame["required"] == ["seq", "kind", "payload", "token"]
        assert set(frame["properties"]["kind"]["enum"]) == {kind.value for kind in Event.Kind}
