"""The MCP sessions of this web process: the SDK's session manager, with a share per user.

The SDK keeps every 2025-11-25 session (an ``initialize`` handshake) in memory
and refuses new ones once ``max_sessions`` are open, whoever holds them. Here
each user may hold at most their ``mcp_sessions`` quota (``accounts.quotas``),
so one user's sessions cannot use up the process's share and lock everyone else
out; a user over it is answered ``429`` with the JSON-RPC error
``mapping.QUOTA_EXCEEDED`` and a ``Retry-After``, and keeps the sessions it has.

Admission is decided under the manager's creation lock, without an await
between the count and the registration, so concurrent ``initialize`` requests of
one user cannot both take the last place. The SDK offers no hook for this:
``agentsite.compat.mcp`` adds them on its private admission and discard steps;
``tests/mcp/test_session_quota.py`` holds the quota to its behaviour.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from starlette.types import Receive, Scope, Send

from accounts.quotas import BUSY_RETRY_AFTER_S, Quota, quota_exceeded
from agentsite.compat.mcp import Handle, HookedSessionManager, Transport
from jobs.mcp import mapping

# The limit of the user whose request is being admitted (set per request, read under the lock).
SESSION_LIMIT_SCOPE_KEY = "agentsite.mcp_session_limit"
_admitting_limit: ContextVar[int | None] = ContextVar("admitting_limit", default=None)


class OverSessionQuota(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"at the limit of {limit} MCP sessions")
        self.limit = limit


class PerUserSessionManager(HookedSessionManager):
    """A ``StreamableHTTPSessionManager`` that counts each user's open sessions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Open sessions by the client id of the principal that opened them (one per user).
        self.open_per_user: Counter[str] = Counter()

    async def handle_session_request(
        self, scope: Scope, receive: Receive, send: Send, proceed: Handle
    ) -> None:
        token = _admitting_limit.set(scope.get(SESSION_LIMIT_SCOPE_KEY))
        try:
            await proceed(scope, receive, send)
        except OverSessionQuota as exc:
            await send_quota_exceeded(send, exc.limit)
        finally:
            _admitting_limit.reset(token)

    def admit(
        self,
        requestor: AuthorizationContext | None,
        proceed: Callable[[AuthorizationContext | None], Transport | None],
    ) -> Transport | None:
        limit = _admitting_limit.get()
        holder = requestor["client_id"] if requestor is not None else None
        if holder is not None and limit is not None and self.open_per_user[holder] >= limit:
            raise OverSessionQuota(limit)
        transport = proceed(requestor)
        if transport is not None and holder is not None:
            self.open_per_user[holder] += 1
        return transport

    async def discard(
        self,
        session_id: str,
        owner: AuthorizationContext | None,
        proceed: Callable[[], Awaitable[None]],
    ) -> None:
        # Called more than once for one session; only the first call finds its owner.
        if owner is not None:
            holder = owner["client_id"]
            self.open_per_user[holder] -= 1
            if self.open_per_user[holder] <= 0:
                del self.open_per_user[holder]
        await proceed()


async def send_quota_exceeded(send: Send, limit: int) -> None:
    refusal = quota_exceeded(Quota.MCP_SESSIONS, limit, retry_after_s=BUSY_RETRY_AFTER_S)
    error = {
        "code": mapping.QUOTA_EXCEEDED,
        "message": refusal.message,
        "data": mapping.quota_exceeded_data(
            retry_after_s=refusal.retry_after_s, details=refusal.details
        ),
    }
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", str(refusal.retry_after_s).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
