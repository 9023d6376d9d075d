"""Anthropic models through the official SDK (``AsyncAnthropic``, streaming).

The SDK does the retries (with backoff) and timeouts; ``ANTHROPIC_BASE_URL``
points it at another Messages API endpoint (a proxy, or a local test server).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any

import anthropic
from django.conf import settings

from sessions.llm.base import Finish, ModelError, StreamItem, TextDelta, ToolUse
from sessions.llm.blocks import wire_messages
from sessions.llm.names import CLAUDE_PREFIX

DEFAULT_MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 4096
# Clients by event loop; a loop that is gone takes its clients with it.
_CLIENTS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str], anthropic.AsyncAnthropic]
] = weakref.WeakKeyDictionary()


class AnthropicModel:
    def __init__(self, *, model: str = "") -> None:
        configured = settings.AGENTSITE_MODEL
        self.name = model or (configured if configured.startswith(CLAUDE_PREFIX) else DEFAULT_MODEL)

    def _client(self) -> anthropic.AsyncAnthropic:
        """One client per event loop and endpoint, shared by every turn on that loop.

        A turn worker runs many turns on one loop: sharing the client shares its
        connection pool (and the TLS set-up) instead of paying for both per call.
        """
        loop = asyncio.get_running_loop()
        key = (settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL)
        clients = _CLIENTS.setdefault(loop, {})
        if key not in clients:
            clients[key] = anthropic.AsyncAnthropic(
                api_key=settings.ANTHROPIC_API_KEY or None,
                base_url=settings.ANTHROPIC_BASE_URL or None,
                max_retries=2,
                timeout=anthropic.Timeout(120.0, connect=10.0),
            )
        return clients[key]

    async def stream(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[StreamItem]:
        params: dict[str, Any] = {
            "model": self.name,
            "max_tokens": MAX_TOKENS,
            "messages": wire_messages(messages),
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = tools
        client = self._client()
        try:
            async with client.messages.stream(**params) as stream:
                async for event in stream:
                    if event.type == "text":
                        yield TextDelta(event.text)
                    elif event.type == "content_block_stop":
                        block = event.content_block
                        if block.type == "tool_use":
                            yield ToolUse(id=block.id, name=block.name, input=dict(block.input))
                final = await stream.get_final_message()
        except anthropic.APIStatusError as exc:
            raise ModelError(f"Anthropic API error {exc.status_code}: {exc.message}") from exc
        except anthropic.APIError as exc:
            raise ModelError(f"Anthropic API error: {exc.message}") from exc
        usage = {
            "input_tokens": final.usage.input_tokens,
            "output_tokens": final.usage.output_tokens,
        }
        yield Finish(stop_reason=final.stop_reason or "end_turn", usage=usage)
