from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from accounts.api_tokens import router as tokens_router
from agentsite.api import api
from agentsite.ops.health import healthz
from agentsite.ops.views import metrics_view
from jobs.api import router as jobs_router
from responses.api import urlpatterns as responses_urls
from sessions.api import router as sessions_router
from sessions.approvals_api import router as approvals_router
from sessions.sse import router as streams_router

handler400 = "agentsite.web.error_pages.bad_request"
handler404 = "agentsite.web.error_pages.page_not_found"
handler500 = "agentsite.web.error_pages.server_error"

# The REST API: the apps' routers on the one NinjaAPI (auth, errors, OpenAPI document).
api.add_router("/", jobs_router)
api.add_router("/", sessions_router)
api.add_router("/", approvals_router)
api.add_router("/", streams_router)
api.add_router("/", tokens_router)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
    path("api/", api.urls),
    # The OpenAI Responses API, in OpenAI's error format (clients use base_url=…/v1).
    path("v1/", include(responses_urls)),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("jobs.urls")),
    path("", include("sessions.urls")),
]
