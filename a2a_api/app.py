"""The A2A edge: the agent card, and both bindings of the protocol, as one ASGI app.

The a2a-sdk's Starlette routes carry the wire (JSON-RPC at ``/a2a/jsonrpc``,
HTTP+JSON under ``/a2a``, server-sent events for streams, the ``A2A-Version``
header, the protocol's error codes) over ``AgentsiteRequestHandler``. Every
call but the public card needs an agentsite API token (``Authorization:
Bearer …``), checked here before the SDK sees the request.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from channels.db import database_sync_to_async
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a_api.card import JSONRPC_PATH, REST_PATH, agent_card
from a2a_api.handler import AgentsiteRequestHandler, AgentsiteUser
from agentsite.web.auth import api_token_for, token_credential

USER_KEY = "agentsite.a2a_user"


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


class ContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, holding the caller the token authenticated."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["base_url"] = base_url(request)
        # The SDK reads the A2A-Version header from here; the token stays out.
        headers = context.state.get("headers", {})
        headers.pop("authorization", None)
        return context

    def build_user(self, request: Request) -> Any:
        return request.scope[USER_KEY]


async def card(request: Request) -> Response:
    """The public card, cacheable for five minutes and revalidated by its ETag."""
    # With the top-level fields an A2A 0.3 client reads (url, preferredTransport, …).
    document = agent_card_to_dict(agent_card(base_url(request)))
    body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
    headers = {"Cache-Control": "public, max-age=300", "ETag": etag}
    wanted = {tag.strip() for tag in request.headers.get("if-none-match", "").split(",")}
    if etag in wanted or "*" in wanted:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _authenticate(raw: str) -> AgentsiteUser | None:
    api_token = api_token_for(raw)
    if api_token is None:
        return None
    return AgentsiteUser(api_token.user, token_credential(api_token))


UNAUTHORIZED = {
    "error": {
        "code": 401,
        "status": "UNAUTHENTICATED",
        "message": "Send an agentsite API token as 'Authorization: Bearer …'.",
    }
}


class TokenRequired:
    """Lets a request through to the SDK's routes only with a live API token."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.authenticate = database_sync_to_async(_authenticate, thread_sensitive=False)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        scheme, _, raw = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        user = None
        if scheme.lower() == "bearer" and raw.strip():
            user = await self.authenticate(raw.strip())
        if user is None:
            response = JSONResponse(
                UNAUTHORIZED, status_code=401, headers={"WWW-Authenticate": 'Bearer realm="a2a"'}
            )
            await response(scope, receive, send)
            return
        scope[USER_KEY] = user
        await self.app(scope, receive, send)


def a2a_app() -> Any:
    handler = AgentsiteRequestHandler()
    builder = ContextBuilder()
    protocol = Starlette(
        routes=[
            *create_jsonrpc_routes(
                handler, JSONRPC_PATH, context_builder=builder, enable_v0_3_compat=True
            ),
            # The same endpoint with a trailing slash: a client that takes the card's URL
            # as a base (httpx's base_url joined with "/", as the A2A TCK's does) posts there.
            *create_jsonrpc_routes(
                handler, f"{JSONRPC_PATH}/", context_builder=builder, enable_v0_3_compat=True
            ),
            *create_rest_routes(
                handler, context_builder=builder, path_prefix=REST_PATH, enable_v0_3_compat=True
            ),
        ]
    )
    guarded = TokenRequired(protocol)
    public = Starlette(routes=[Route(AGENT_CARD_WELL_KNOWN_PATH, card, methods=["GET"])])

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == AGENT_CARD_WELL_KNOWN_PATH:
            await public(scope, receive, send)
        else:
            await guarded(scope, receive, send)

    return app


def is_a2a_path(path: str) -> bool:
    return (
        path == AGENT_CARD_WELL_KNOWN_PATH or path == REST_PATH or path.startswith(f"{REST_PATH}/")
    )


def a2a_or(django_app: Any) -> Any:
    """Send HTTP requests for the agent card and ``/a2a`` to the A2A app, the rest on."""
    a2a: Any = None

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal a2a
        if scope["type"] == "http" and is_a2a_path(scope["path"]):
            if a2a is None:
                a2a = a2a_app()
            await a2a(scope, receive, send)
            return
        await django_app(scope, receive, send)

    return app
