"""BodyLimit refuses a big body at the ASGI level, for servers that stream bodies to the app."""

from __future__ import annotations

import json
from typing import Any

from django.test import override_settings

from agentsite.web.middleware import BodyLimit

LIMIT = 1000


class Client:
    def __init__(self, chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> None:
        self.chunks = chunks
        self.headers = headers
        self.pulled = 0
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        self.pulled += 1
        body = self.chunks.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(self.chunks)}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def request(self, path: str) -> None:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            body = b""
            while True:
                message = await receive()
                body += message["body"]
                if not message["more_body"]:
                    break
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})

        scope = {"type": "http", "method": "POST", "path": path, "headers": self.headers}
        await BodyLimit(app)(scope, self.receive, self.send)


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
async def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    client = Client([b"x" * 10], [(b"content-length", b"5000")])
    await client.request("/api/jobs")

    assert client.pulled == 0
    assert client.sent[0]["status"] == 413
    assert json.loads(client.sent[1]["body"])["error"] == {
        "code": "too_large",
        "message": "The request body is larger than AGENTSITE_MAX_BODY_BYTES allows.",
        "details": {"max_bytes": LIMIT},
    }


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
async def test_a_streamed_body_is_refused_when_it_passes_the_limit() -> None:
    client = Client([b"x" * 600] * 100, [])
    await client.request("/api/jobs")

    assert client.pulled == 2  # the chunk that passed the limit was the last one read
    assert client.sent[0]["status"] == 413


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
async def test_a_body_within_the_limit_reaches_the_app() -> None:
    client = Client([b"x" * 600, b"y" * 400], [(b"content-length", b"1000")])
    await client.request("/api/jobs")

    assert client.sent[0]["status"] == 200
    assert client.sent[1]["body"] == b"x" * 600 + b"y" * 400


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
async def test_mcp_is_answered_with_a_json_rpc_error() -> None:
    client = Client([b"x" * 10], [(b"content-length", b"5000")])
    await client.request("/mcp")

    assert client.sent[0]["status"] == 413
    assert (b"content-type", b"application/json") in client.sent[0]["headers"]
    answer = json.loads(client.sent[1]["body"])
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert "AGENTSITE_MAX_BODY_BYTES" in answer["error"]["message"]
