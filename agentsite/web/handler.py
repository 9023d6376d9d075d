"""Django's ASGI handler, with a synchronous view's request in one hand-off to a kept thread.

Django's ``ASGIHandler`` builds its middleware chain in async mode. With the
chain synchronous (``SyncChainMiddleware``), a request to a synchronous view
crossed threads four times: into a thread for the chain, back to the event loop
to resolve the URL, into the thread again for the view, and back. And that
thread was a new one for each request (asgiref's ``ThreadSensitiveContext``), so
each request also opened its own database connection: on SQLite the file, its
pragmas, Django's SQL functions and a read of the whole schema, about 0.75 ms,
more than most views' own work.

Here (``agentsite.compat.django.OneHandOffHandler``, where Django's handler classes
are subclassed) a request to a synchronous view goes once to one of
``AGENTSITE_REQUEST_THREADS`` kept threads, where a middleware chain built in
synchronous mode (as under WSGI), the URL resolution and the view run together.
On SQLite each thread keeps its database connection from one request to the next,
as the stream readers do (``sessions.streams.reads``): one on which an error
occurred, or left inside a transaction, is closed after its request. With a
connection pool (the web process on PostgreSQL) the connection goes back to the
pool after each request; without one, Django's own rule applies (``CONN_MAX_AGE``,
``close_old_connections``). A request to an ``async def`` view (the streams, the
Responses API) takes Django's own async path and never holds one of these threads.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import django
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections

from agentsite.compat.django import OneHandOffHandler
from agentsite.core.database import connections_keep_if_sound

REQUEST_THREAD_PREFIX = "request"


def after_request() -> Callable[[], None]:
    """What a request thread does with its connections once a request is answered."""
    database = settings.DATABASES[DEFAULT_DB_ALIAS]
    if "pool" in database.get("OPTIONS", {}):
        return connections.close_all  # back to the pool: taking one is cheap
    if str(database["ENGINE"]).endswith("sqlite3"):
        return connections_keep_if_sound  # opening one costs more than most requests
    return close_old_connections


class Handler(OneHandOffHandler):
    """The web process's handler: ``AGENTSITE_REQUEST_THREADS`` kept threads, and the
    connection rule of its database (``after_request``)."""

    def __init__(self) -> None:
        threads = concurrent.futures.ThreadPoolExecutor(
            settings.AGENTSITE_REQUEST_THREADS, thread_name_prefix=REQUEST_THREAD_PREFIX
        )
        super().__init__(threads, after_request())


def asgi_application() -> Any:
    """``django.core.asgi.get_asgi_application``, serving through ``Handler`` (Django's own
    handler with ``AGENTSITE_REQUEST_THREADS=0``: each request a thread of its own)."""
    django.setup(set_prefix=False)
    if settings.AGENTSITE_REQUEST_THREADS == 0:
        return ASGIHandler()
    return Handler()
