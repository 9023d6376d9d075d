"""Which websocket handshakes may use the login cookie.

Browsers send an ``Origin`` header on every websocket handshake, so a page on
another site that opens a socket to agentsite shows itself. The origin must be
the site's own, scheme, host and port alike (``http://host:8000`` for a socket
opened as ``ws://host:8000``), or one listed in ``CSRF_TRUSTED_ORIGINS`` (behind
a proxy that ends TLS, list the public ``https://`` origin there). Anything else
is refused: a page on another port or scheme of the same host is another
origin, and would otherwise ride on the visitor's login cookie.

A handshake without an ``Origin`` does not come from a browser; it may connect,
but only with an API token: its ``Cookie`` header is dropped before
authentication, so a script never needs to invent an ``Origin``.

A handshake that offers an API token (``Sec-WebSocket-Protocol:
agentsite.bearer.<token>``) is authenticated by that token alone, never by the
cookie, whatever its origin: it skips the cookie and session middleware.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
SECURE_SCHEMES = {"https", "wss"}

Origin = tuple[str, str, int]
TOKEN_SUBPROTOCOL_PREFIX = "agentsite.bearer."


def offered_api_token(scope: dict[str, Any]) -> str:
    """An API token from ``Sec-WebSocket-Protocol: agentsite.bearer.<token>``.

    Never from the URL: a query string lands in access logs and proxy logs.
    """
    for protocol in scope.get("subprotocols", []):
        if protocol.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return str(protocol).removeprefix(TOKEN_SUBPROTOCOL_PREFIX)
    return ""


def origin_parse(origin: str) -> Origin | None:
    """``(scheme, host, port)`` of an http(s) origin, or None for anything else (e.g. "null")."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def allowed_hosts() -> list[str]:
    # As Django's own host check: with DEBUG and no ALLOWED_HOSTS, local names only.
    if settings.ALLOWED_HOSTS or not settings.DEBUG:
        return list(settings.ALLOWED_HOSTS)
    return [".localhost", "127.0.0.1", "[::1]"]


def site_origin(scope: dict[str, Any], host_header: str) -> Origin | None:
    """The origin a page of this site has when it reached the site through ``host_header``."""
    domain, _ = split_domain_port(host_header)
    if not domain or not validate_host(domain, allowed_hosts()):
        return None
    scheme = "https" if scope.get("scheme") in SECURE_SCHEMES else "http"
    return origin_parse(f"{scheme}://{host_header}")


def trusted(origin: Origin) -> bool:
    """Whether ``origin`` is listed in ``CSRF_TRUSTED_ORIGINS`` (``https://*.example.com``
    lists the subdomains of example.com, as for Django's CSRF check)."""
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        wildcard = "://*." in entry
        listed = origin_parse(entry.replace("://*.", "://", 1))
        if listed is None or (listed[0], listed[2]) != (scheme, port):
            continue
        if host.endswith("." + listed[1]) if wildcard else host == listed[1]:
            return True
    return False


def header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def origin_allowed(scope: dict[str, Any], origin: str) -> bool:
    parsed = origin_parse(origin)
    if parsed is None:
        return False
    host_header = header(scope, b"host")
    return trusted(parsed) or (
        host_header is not None and parsed == site_origin(scope, host_header)
    )


class BrowserOriginOrToken:
    """``application`` for browser handshakes whose origin is allowed; ``cookieless`` (by
    default ``application`` too) for those that may only use an API token: without an
    ``Origin``, or offering a token. Given the routes without the cookie and session
    middleware, such a socket keeps no session store or lazy user of its own."""

    def __init__(self, application: Any, cookieless: Any = None) -> None:
        self.application = application
        self.cookieless = application if cookieless is None else cookieless
        # A handshake without a Host header (an in-process test client; every
        # HTTP/1.1 handshake has one) can only be held to the allowed host names.
        self.hosts_only = AllowedHostsOriginValidator(application)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        origin = header(scope, b"origin")
        if origin is None:
            headers = scope.get("headers", [])
            if any(name == b"cookie" for name, _ in headers):
                kept = [(name, value) for name, value in headers if name != b"cookie"]
                scope = {**scope, "headers": kept}
            return await self.cookieless(scope, receive, send)
        if header(scope, b"host") is None:
            return await self.hosts_only(scope, receive, send)
        if origin_allowed(scope, origin):
            if offered_api_token(scope):
                return await self.cookieless(scope, receive, send)
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
