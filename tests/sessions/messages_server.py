"""A local HTTP server that speaks the Anthropic Messages API streaming protocol.

Enough of it for the official SDK: ``POST /v1/messages`` with ``stream: true``
answers with server-sent events (message_start, content_block_start /
content_block_delta (text_delta, input_json_delta) / content_block_stop,
message_delta, message_stop), or with an error status and an error body.
Replies are queued by the test; requests are recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class MessagesServer:
    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = server.replies.pop(0) if server.replies else {"text": "(no reply)"}
                if "status" in reply:
                    self.send_error_reply(reply)
                else:
                    self.send_stream(body, reply)

            def send_error_reply(self, reply: dict[str, Any]) -> None:
                payload = json.dumps(
                    {"type": "error", "error": {"type": reply["type"], "message": reply["message"]}}
                ).encode()
                self.send_response(reply["status"])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("retry-after-ms", "10")
                self.end_headers()
                self.wfile.write(payload)

            def send_stream(self, request: dict[str, Any], reply: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for name, data in sse_events(request, reply):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> MessagesServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def sse_events(request: dict[str, Any], reply: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    text = reply.get("text", "")
    tool = reply.get("tool_use")
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": request["model"],
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 42, "output_tokens": 1},
            },
        },
    )
    index = 0
    if text:
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        )
        yield "ping", {"type": "ping"}
        for start in range(0, len(text), 5):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": text[start : start + 5]},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    if tool:
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {
                    "type": "tool_use",
                    "id": tool["id"],
                    "name": tool["name"],
                    "input": {},
                },
            },
        )
        raw = json.dumps(tool["input"])
        for start in range(0, len(raw), 4):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": raw[start : start + 4]},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 17},
        },
    )
    yield "message_stop", {"type": "message_stop"}
