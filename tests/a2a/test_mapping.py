"""What a task's parts say on the wire, without a server: the requests a waiting task names."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import json_format

from a2a_api.mapping import request_part


def test_a_request_s_expiry_is_iso_8601_as_the_rest_api_writes_it() -> None:
    expires_at = datetime(2026, 12, 6, 5, 21, 49, 893516, tzinfo=UTC)
    pending = {
        "id": "apr_0123456789abcdef",
        "kind": "approval",
        "tool": "run_tests",
        "arguments": {"path": "."},
        "expires_at": expires_at,
    }
    data = json_format.MessageToDict(request_part(pending).data)
    assert data == {
        "approval_request_id": "apr_0123456789abcdef",
        "kind": "approval",
        "expires_at": "2026-12-06T05:21:49.893516+00:00",
        "tool": "run_tests",
        "arguments": {"path": "."},
    }
    assert datetime.fromisoformat(data["expires_at"]) == expires_at
