"""Only the models AGENTSITE_ALLOWED_MODELS offers; the scripted one only where tests turn it on.

Before: any user could name any claude-… model (paid with the operator's key) or
the scripted test model (which keeps every request it is sent in Redis).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.test import Client

from sessions.llm import get_model_client
from sessions.llm import scripted as scripted_module
from sessions.llm.scripted import ScriptedModel, scripted_requests
from sessions.models import AgentSession, Event

pytestmark = pytest.mark.django_db


def create(client: Client, model: str) -> Any:
    return client.post("/api/sessions", {"model": model}, content_type="application/json")


def test_a_claude_model_the_operator_did_not_offer_is_refused(api_client: Client) -> None:
    refused = create(api_client, "claude-opus-4-1")

    assert refused.status_code == 422, refused.content
    error = refused.json()["error"]
    assert error["code"] == "model_not_allowed"
    assert error["details"]["model"] == "claude-opus-4-1"
    assert "offline" in error["details"]["allowed"]
    assert not AgentSession.objects.exists()


def test_the_default_and_the_offline_model_are_offered(api_client: Client) -> None:
    assert create(api_client, "").status_code == 201
    assert create(api_client, "offline").status_code == 201


def test_patterns_offer_a_family_of_models(api_client: Client, settings: Any) -> None:
    settings.AGENTSITE_ALLOWED_MODELS = ["offline", "claude-sonnet-*"]
    assert create(api_client, "claude-sonnet-4-5").status_code == 201
    assert create(api_client, "claude-opus-4-1").status_code == 422


def test_the_scripted_model_is_refused_where_it_is_not_turned_on(
    api_client: Client, settings: Any
) -> None:
    settings.AGENTSITE_SCRIPTED_MODEL = False
    settings.AGENTSITE_ALLOWED_MODELS = ["offline", "scripted"]  # naming it is not enough

    refused = create(api_client, "scripted")

    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "model_not_allowed"
    with pytest.raises(ValueError, match="scripted"):
        get_model_client("scripted", session_id="ses_x")


def test_a_message_to_a_session_whose_model_was_withdrawn_is_refused(
    api_client: Client, user: Any, settings: Any
) -> None:
    settings.AGENTSITE_ALLOWED_MODELS = ["offline", "claude-sonnet-4-5"]
    session_id = create(api_client, "claude-sonnet-4-5").json()["session_id"]
    settings.AGENTSITE_ALLOWED_MODELS = ["offline"]

    refused = api_client.post(
        f"/api/sessions/{session_id}/messages", {"text": "hi"}, content_type="application/json"
    )

    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "model_not_allowed"
    assert not Event.objects.filter(session_id=session_id).exists()


def test_the_scripted_models_requests_are_trimmed_and_expire(monkeypatch: Any) -> None:
    monkeypatch.setattr(scripted_module, "REQUESTS_KEPT", 3)
    model = ScriptedModel(key="ses_trimmed")

    async def call(n: int) -> None:
        messages = [{"role": "user", "content": [{"type": "text", "text": f"call {n}"}]}]
        async for _ in model.stream(system="", messages=messages, tools=[]):
            pass

    for n in range(5):
        async_to_sync(call)(n)

    kept = scripted_requests("ses_trimmed")
    assert [r["messages"][-1]["content"][0]["text"] for r in kept] == ["call 2", "call 3", "call 4"]
    conn = redis.Redis.from_url(django_settings.REDIS_URL)
    key = f"{django_settings.REDIS_PREFIX}:scripted:ses_trimmed:requests"
    assert 0 < conn.ttl(key) <= scripted_module.SCRIPT_TTL_S
