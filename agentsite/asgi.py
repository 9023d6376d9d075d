"""ASGI entry point: HTTP through Django, websockets through Channels."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
# Concurrent requests run on the request threads (agentsite.web.handler) and the
# stream readers, and an async view's database work in threads of its own: on
# PostgreSQL they share a bounded connection pool (see DATABASES in settings). The
# switch is for this process's settings only: a process it starts (a worker forks
# work horses, which a pool's threads do not survive) must not inherit it.
_pool_by_default = "AGENTSITE_DB_POOL" not in os.environ
if _pool_by_default:
    os.environ["AGENTSITE_DB_POOL"] = "true"
# Django must be set up before anything imports models (the routing does).
from agentsite.web.handler import asgi_application  # noqa: E402

django_asgi_app = asgi_application()
if _pool_by_default:
    del os.environ["AGENTSITE_DB_POOL"]

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from a2a_api.app import a2a_or  # noqa: E402
from agentsite.core.heap import settle_long_lived  # noqa: E402
from agentsite.core.telemetry import StreamsCounted  # noqa: E402
from agentsite.web.middleware import BodyLimit, NoSniff, daphne_body_limit  # noqa: E402
from agentsite.web.origin import BrowserOriginOrToken  # noqa: E402
from agentsite.web.wire import WireInScope  # noqa: E402
from jobs.mcp.endpoint import mcp_or  # noqa: E402
from sessions.routing import websocket_urlpatterns  # noqa: E402

# Under daphne, which buffers a whole body before the application sees it.
daphne_body_limit()

sockets = URLRouter(websocket_urlpatterns)
application = ProtocolTypeRouter(
    {
        # The pages' CSS and JS come from the app itself: no build step, no collectstatic.
        # StreamsCounted: this process's open SSE responses and websockets, for /metrics.
        # BodyLimit: a body over AGENTSITE_MAX_BODY_BYTES is refused before it is buffered.
        # WireInScope: a stream sees how much its client has left unread (agentsite.web.wire).
        # a2a_or: the agent card and /a2a go to the A2A app (a2a_api.app).
        # NoSniff: the static files get the nosniff header Django's views already have.
        "http": WireInScope(
            StreamsCounted(
                BodyLimit(a2a_or(mcp_or(NoSniff(ASGIStaticFilesHandler(django_asgi_app)))))
            )
        ),
        # A handshake that may only use an API token (no Origin, or a token offered)
        # skips the cookie and session middleware. WireInScope: stream frames are
        # written straight to daphne's connection (agentsite.web.wire).
        "websocket": WireInScope(
            StreamsCounted(BrowserOriginOrToken(AuthMiddlewareStack(sockets), cookieless=sockets))
        ),
    }
)

# Start-up is done: what it built lives as long as the process (agentsite.core.heap).
settle_long_lived()
