"""``/metrics``: Prometheus figures (``agentsite.ops.metrics``), for staff only."""

from __future__ import annotations

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY
from prometheus_client.exposition import choose_encoder

from agentsite.api import RETRY_AFTER_S
from agentsite.ops import metrics  # noqa: F401  (registers the deployment's figures)
from agentsite.web.auth import request_caller
from agentsite.web.http import error_body


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(code, message), status=status)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    try:
        user = request_caller(request)
    except DatabaseError:
        response = _error(503, "unavailable", "The database is unavailable for a moment.")
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    if user is None:
        response = _error(
            401, "unauthorized", "Log in as staff or send 'Authorization: Bearer <token>'."
        )
        response["WWW-Authenticate"] = "Bearer"
        return response
    if not getattr(user, "is_staff", False):
        return _error(403, "forbidden", "Metrics are for staff users.")
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encode(REGISTRY), content_type=content_type)
