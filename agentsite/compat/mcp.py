"""The MCP SDK's session manager, with hooks on its private admission steps.

Verified against mcp 2.3.0. Checked by ``tests/compat/test_mcp.py``.

``StreamableHTTPSessionManager`` offers no hook on who may open a session. For a
request without a session id, ``_handle_stateful_request(scope, receive, send)``
calls ``_admit_session(requestor)`` under its creation lock, which registers and
returns the new transport (None when ``max_sessions`` are open), and
``_discard_session(session_id, transport)`` ends one (possibly more than once per
session); ``_session_owners`` maps a session id to the ``AuthorizationContext``
that opened it until it is discarded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

Transport = StreamableHTTPServerTransport
Handle = Callable[[Scope, Receive, Send], Awaitable[None]]


class HookedSessionManager(StreamableHTTPSessionManager):
    """``StreamableHTTPSessionManager`` whose admission and discard steps a subclass
    extends through ``handle_session_request``, ``admit`` and ``discard``."""

    async def handle_session_request(
        self, scope: Scope, receive: Receive, send: Send, proceed: Handle
    ) -> None:
        """A request that may open or use a session; ``proceed`` is the SDK's handling."""
        await proceed(scope, receive, send)

    def admit(
        self,
        requestor: AuthorizationContext | None,
        proceed: Callable[[AuthorizationContext | None], Transport | None],
    ) -> Transport | None:
        """Under the creation lock, with no await in between: ``proceed`` registers the
        session and returns its transport, or None when the manager is full."""
        return proceed(requestor)

    async def discard(
        self,
        session_id: str,
        owner: AuthorizationContext | None,
        proceed: Callable[[], Awaitable[None]],
    ) -> None:
        """A session ends; ``owner`` is who opened it, None on a repeated call."""
        await proceed()

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle_session_request(scope, receive, send, super()._handle_stateful_request)

    def _admit_session(self, requestor: AuthorizationContext | None) -> Transport | None:
        return self.admit(requestor, super()._admit_session)

    async def _discard_session(self, session_id: str, transport: Transport) -> None:
        async def proceed() -> None:
            await StreamableHTTPSessionManager._discard_session(self, session_id, transport)

        await self.discard(session_id, self._session_owners.get(session_id), proceed)
