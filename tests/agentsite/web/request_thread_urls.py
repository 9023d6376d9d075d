"""The site's URLs plus views that tell where and on which connection they ran."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.urls import path

from agentsite.urls import urlpatterns as site_urlpatterns

# Each database connection a view ran on, kept so that none is collected and its id reused.
seen: list[Any] = []
# Set by a test, inside its event loop: what the async view waits for.
release: dict[str, asyncio.Event] = {}


def where(request: HttpRequest) -> JsonResponse:
    get_user_model().objects.exists()
    seen.append(connection.connection)
    return JsonResponse({"thread": threading.current_thread().name, "connection": len(seen) - 1})


def fails_in_the_database(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")
    except DatabaseError:
        pass  # handled: the answer is fine, the connection is suspect
    seen.append(connection.connection)
    return JsonResponse({"connection": len(seen) - 1})


async def waits(request: HttpRequest) -> JsonResponse:
    await release["event"].wait()
    return JsonResponse({"thread": threading.current_thread().name})


urlpatterns = [
    path("test/where", where),
    path("test/fails-in-the-database", fails_in_the_database),
    path("test/waits", waits),
    *site_urlpatterns,
]
