"""An unexpected exception under /api/, /v1/ or /mcp: a JSON 500, logged, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from django.test import Client, override_settings

from jobs.mcp import endpoint


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize(
    ("path", "code"), [("/api/test-fails", "internal_error"), ("/v1/test-fails", "server_error")]
)
def test_an_api_view_that_raises_answers_a_json_500(
    path: str, code: str, debug: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with override_settings(ROOT_URLCONF="tests.agentsite.web.raising_urls", DEBUG=debug):
        response = Client(raise_request_exception=False).get(path)

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"] == "The server failed to answer this request."
    assert "Traceback" not in response.content.decode()
    assert "/work/secret/place" not in response.content.decode()
    assert any("the view failed" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


def test_the_mcp_endpoint_answers_a_json_500_when_it_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def failing_authenticate(scope: Any) -> Any:
        raise RuntimeError("the endpoint failed at /work/secret/place")

    monkeypatch.setattr(endpoint, "authenticate", failing_authenticate)
    app = endpoint.mcp_or(django_app=None)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/mcp", "method": "POST", "headers": []}
    anyio.run(app, scope, receive, send)

    assert sent[0]["status"] == 500
    body = json.loads(sent[1]["body"])
    assert body["error"] == {"code": -32603, "message": "The server failed to answer this request."}
    assert any("the endpoint failed" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
