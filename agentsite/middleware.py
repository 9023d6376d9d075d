"""Middleware of agentsite's own."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase


class SyncChainMiddleware:
    """Last in ``MIDDLEWARE``: the chain above it runs synchronously, in one thread.

    Under ASGI, Django runs each hook of every ``MiddlewareMixin`` middleware
    (all of its own) through ``sync_to_async``: a dozen thread hand-offs per
    request with the stock list. A synchronous-only middleware innermost makes
    Django build the whole chain in synchronous mode and adapt it once.
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)
