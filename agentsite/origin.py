"""Which websocket handshakes may use the login cookie.

Browsers send an ``Origin`` header on every websocket handshake, so a page on
another site that opens a socket to agentsite shows itself: such handshakes are
refused (cross-site websocket hijacking would otherwise ride on the visitor's
login cookie). A handshake without an ``Origin`` does not come from a browser;
it may connect, but only with an API token: its ``Cookie`` header is dropped
before authentication, so a script never needs to invent an ``Origin``.
"""

from __future__ import annotations

from typing import Any

from channels.security.websocket import AllowedHostsOriginValidator


class BrowserOriginOrToken:
    def __init__(self, application: Any) -> None:
        self.application = application
        self.checked = AllowedHostsOriginValidator(application)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = scope.get("headers", [])
        if any(name == b"origin" for name, _ in headers):
            return await self.checked(scope, receive, send)
        cookieless = [(name, value) for name, value in headers if name != b"cookie"]
        return await self.application({**scope, "headers": cookieless}, receive, send)
