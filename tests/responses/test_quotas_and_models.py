"""/v1/responses refuses models the deployment does not offer, and says 429 over a quota.

Both in OpenAI's error format (``param`` "model" for a model): before, any
claude-… name and the scripted test model were taken, and a user had no limit.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.test import Client

from accounts.models import ApiToken
from responses.models import AgentResponse
from sessions.models import AgentSession

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def v1(user: Any) -> Client:
    conn = redis.Redis.from_url(django_settings.REDIS_URL)
    for key in conn.scan_iter(f"{django_settings.REDIS_PREFIX}:quota:*"):
        conn.delete(key)
    _, raw = ApiToken.issue(user=user, name="v1")
    return Client(headers={"Authorization": f"Bearer {raw}"})


def create(client: Client, **body: Any) -> Any:
    return client.post("/v1/responses", {"input": "hello", **body}, content_type="application/json")


@pytest.mark.parametrize("model", ["claude-opus-4-1", "anthropic"])
def test_a_model_not_offered_is_refused_with_its_param(v1: Client, model: str) -> None:
    refused = create(v1, model=model)

    assert refused.status_code == 400, refused.content
    error = refused.json()["error"]
    assert error["param"] == "model" and error["code"] == "model_not_allowed"
    assert error["type"] == "invalid_request_error"
    assert not AgentSession.objects.exists()


def test_the_scripted_model_is_refused_where_it_is_not_turned_on(v1: Client, settings: Any) -> None:
    settings.AGENTSITE_SCRIPTED_MODEL = False
    refused = create(v1, model="scripted")
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "model"


def test_over_the_messages_limit_a_response_is_refused_with_retry_after(
    v1: Client, settings: Any
) -> None:
    settings.AGENTSITE_QUOTA_MESSAGES_PER_MINUTE = 1
    assert create(v1, model="offline").status_code == 200

    refused = create(v1, model="offline")

    assert refused.status_code == 429, refused.content
    assert refused.json()["error"]["code"] == "quota_exceeded"
    assert int(refused["Retry-After"]) >= 1
    assert AgentResponse.objects.count() == AgentSession.objects.count() == 1
