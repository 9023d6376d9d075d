"""No endpoint takes an API token from its URL: URLs end up in access logs."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["token", "access_token", "api_key", "key"])
@pytest.mark.parametrize(
    "path",
    [
        "/api/sessions",
        "/api/jobs",
        "/api/tokens",
        "/api/sessions/ses_x/stream",
        "/v1/responses/resp_x",
    ],
)
def test_a_token_in_the_query_string_authenticates_nothing(user: Any, path: str, name: str) -> None:
    _, raw = ApiToken.issue(user=user)

    response = Client().get(f"{path}?{name}={raw}")

    assert response.status_code == 401, response.content[:200]
