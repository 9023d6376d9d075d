"""Who is calling: API tokens (``Authorization: Bearer``) and the browser's login cookie.

The REST API, the SSE streams, the websocket and MCP all authenticate here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import AuthenticationError
from ninja.security import HttpBearer, SessionAuth

from accounts.credentials import Credential
from accounts.models import ApiToken

LAST_USED_RESOLUTION = timedelta(seconds=60)


class BearerTokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> AbstractBaseUser | None:
        api_token = api_token_for(token)
        if api_token is None:
            return None
        request.api_token_id = api_token.pk  # type: ignore[attr-defined]
        return api_token.user


class BrowserSessionAuth(SessionAuth):
    """The browser's login cookie, CSRF-checked on unsafe methods.

    Ninja's ``SessionAuth`` checks CSRF before it looks at the user, so a
    script's POST with a missing or wrong token was told "CSRF check Failed"
    (403) instead of 401. Without a logged-in user there is nothing to protect.
    """

    def __call__(self, request: HttpRequest) -> Any:
        if not request.user.is_authenticated:
            return None
        return super().__call__(request)


def api_token_for(raw: str) -> ApiToken | None:
    """The unexpired token ``raw`` is, if its user is active (``token.user``), or None."""
    api_token = ApiToken.objects.for_raw_token(raw)
    if api_token is None or not api_token.user.is_active:
        return None
    now = timezone.now()
    # A write per request would serialise every API call on SQLite's write lock;
    # "last used" to the minute is what an operator needs.
    if api_token.last_used_at is None or now - api_token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
    return api_token


def user_for_token(raw: str) -> AbstractBaseUser | None:
    """The active user a raw API token belongs to, or None."""
    api_token = api_token_for(raw)
    return api_token.user if api_token is not None else None


def token_credential(api_token: ApiToken) -> Credential:
    return Credential(user_id=api_token.user_id, token_id=api_token.pk)


def request_credential(request: HttpRequest) -> Credential:
    """What the request authenticated with: its API token, or its login session."""
    user = request_user(request)
    token_id: int | None = getattr(request, "api_token_id", None)
    if token_id is not None:
        return Credential(user_id=user.pk, token_id=token_id)
    return Credential(user_id=user.pk, session_key=request.session.session_key)


def request_user(request: HttpRequest) -> AbstractBaseUser:
    """The authenticated caller (``request.auth`` for Bearer, ``request.user`` otherwise)."""
    user = getattr(request, "auth", None)
    if isinstance(user, AbstractBaseUser):
        return user
    if isinstance(request.user, AnonymousUser):  # pragma: no cover - auth guards this
        raise AuthenticationError()
    return request.user


def request_caller(request: HttpRequest) -> AbstractBaseUser | None:
    """The user of a Bearer token if one is sent, else of the login session; None for neither.

    For the plain views outside the API (``/healthz``, ``/metrics``). Raises
    ``DatabaseError`` when the database cannot tell.
    """
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return user_for_token(token.strip())
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated else None
