"""The scripted model, for tests: replays stored responses and records its requests.

Scripts live in Redis, keyed by session, so a test can set them up and read
back what the model was sent while the turn itself runs in a worker process.

A response is a dict::

    {"text": "...",                      # streamed in pieces of `chunk` characters
     "tool_calls": [{"name", "input", "id"?}],
     "chunk": 8, "delay_s": 0.0,         # pacing of the text deltas
     "gate": "name",                     # wait until scripted_open(key, name) before finishing
     "error": "message"}                 # raise ModelError after the text
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import redis
import redis.asyncio
from django.conf import settings

from agentsite.core.redis_connections import async_redis_client, redis_client
from sessions.llm.base import Finish, ModelError, StreamItem, TextDelta, ToolUse, approx_tokens
from sessions.llm.blocks import wire_messages
from sessions.llm.names import SCRIPTED

NO_MORE = "(the scripted model has no response left)"
GATE_TIMEOUT_S = 60.0
# What is kept of a session's script: its last requests, and nothing after an hour.
REQUESTS_KEPT = 200
SCRIPT_TTL_S = 3600


def _redis() -> redis.Redis:
    return redis_client()


def _key(key: str, part: str) -> str:
    return f"{settings.REDIS_PREFIX}:scripted:{key}:{part}"


def scripted_push(key: str, *responses: dict[str, Any]) -> None:
    """Queue responses for the session ``key``; each model call takes the next one."""
    if responses:
        pipe = _redis().pipeline()
        pipe.rpush(_key(key, "responses"), *[json.dumps(r) for r in responses])
        pipe.expire(_key(key, "responses"), SCRIPT_TTL_S)
        pipe.execute()


def scripted_requests(key: str) -> list[dict[str, Any]]:
    """The requests the model received for ``key`` (the last ``REQUESTS_KEPT``):
    ``{"system", "messages", "tools"}``."""
    return [json.loads(raw) for raw in _redis().lrange(_key(key, "requests"), 0, -1)]


def scripted_open(key: str, gate: str) -> None:
    """Release a response waiting on ``gate``."""
    _redis().set(_key(key, f"gate:{gate}"), "1", ex=SCRIPT_TTL_S)


class ScriptedModel:
    name = SCRIPTED

    def __init__(self, *, key: str) -> None:
        self.key = key

    async def stream(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[StreamItem]:
        messages = wire_messages(messages)  # what a real model would be sent
        request = {"system": system, "messages": messages, "tools": tools}
        conn = async_redis_client()
        try:
            response = await self._next(conn, request)
            text = str(response.get("text", ""))
            chunk = max(1, int(response.get("chunk", 8)))
            delay = float(response.get("delay_s", 0.0))
            for start in range(0, len(text), chunk):
                if delay:
                    await asyncio.sleep(delay)
                yield TextDelta(text[start : start + chunk])
            if response.get("gate"):
                await self._wait(conn, str(response["gate"]))
        finally:
            await conn.aclose()
        if response.get("error"):
            raise ModelError(str(response["error"]))
        calls = response.get("tool_calls") or []
        for i, call in enumerate(calls):
            yield ToolUse(
                id=str(call.get("id") or f"toolu_{i}"),
                name=str(call["name"]),
                input=dict(call.get("input") or {}),
            )
        usage = {"input_tokens": approx_tokens(messages), "output_tokens": approx_tokens(text)}
        yield Finish(stop_reason="tool_use" if calls else "end_turn", usage=usage)

    async def _next(self, conn: redis.asyncio.Redis, request: dict[str, Any]) -> dict[str, Any]:
        requests = _key(self.key, "requests")
        async with conn.pipeline() as pipe:
            pipe.rpush(requests, json.dumps(request, default=str))
            pipe.ltrim(requests, -REQUESTS_KEPT, -1)
            pipe.expire(requests, SCRIPT_TTL_S)
            await pipe.execute()
        raw = await conn.lpop(_key(self.key, "responses"))
        if not isinstance(raw, bytes | str):
            return {"text": NO_MORE}
        response: dict[str, Any] = json.loads(raw)
        return response

    async def _wait(self, conn: redis.asyncio.Redis, gate: str) -> None:
        # Bounded, so that a test that never opens its gate cannot hold a turn worker for good.
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not await conn.exists(_key(self.key, f"gate:{gate}")):
            if time.monotonic() > deadline:
                raise ModelError(f"scripted gate {gate!r} was never opened")
            await asyncio.sleep(0.05)
