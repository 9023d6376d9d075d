"""The site's URLs plus views that fail, for tests of what an unexpected error answers."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from agentsite.urls import urlpatterns as site_urlpatterns


def fails(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("the view failed at /work/secret/place")


urlpatterns = [
    path("api/test-fails", fails),
    path("v1/test-fails", fails),
    path("test-fails", fails),
    *site_urlpatterns,
]
