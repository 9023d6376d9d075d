"""Messages a minute and live turns per user: over a limit, 429 with Retry-After, nothing written.

Before: one user could post without bound and queue a turn in every one of its
sessions at once, ahead of everyone else's turns.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.test import Client

from accounts.models import UserQuota
from sessions.models import Event, Run
from tests.sessions.factories import make_session

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_windows() -> Iterator[None]:
    """User ids come back after a rollback: start each test with empty message windows."""

    def clear() -> None:
        conn = redis.Redis.from_url(django_settings.REDIS_URL)
        for key in conn.scan_iter(f"{django_settings.REDIS_PREFIX}:quota:*"):
            conn.delete(key)

    clear()
    yield
    clear()


def post(client: Client, session_id: str, text: str = "hello") -> Any:
    return client.post(
        f"/api/sessions/{session_id}/messages", {"text": text}, content_type="application/json"
    )


def assert_quota_exceeded(response: Any, quota: str) -> None:
    assert response.status_code == 429, response.content
    error = response.json()["error"]
    assert error["code"] == "quota_exceeded" and error["details"]["quota"] == quota
    assert 1 <= int(response["Retry-After"]) <= 60


def test_messages_over_the_minutes_limit_are_refused_for_that_user_only(
    api_client: Client, other_api_client: Client, user: Any, other_user: Any, settings: Any
) -> None:
    settings.AGENTSITE_QUOTA_MESSAGES_PER_MINUTE = 3
    mine, theirs = make_session(user), make_session(other_user)
    assert [post(api_client, mine.id).status_code for _ in range(3)] == [202, 202, 202]

    refused = post(api_client, mine.id, "one too many")

    assert_quota_exceeded(refused, "messages_per_minute")
    texts = [e.payload["text"] for e in Event.objects.filter(session=mine, kind="user_message")]
    assert texts == ["hello"] * 3
    assert post(other_api_client, theirs.id).status_code == 202


def test_a_message_refused_for_another_reason_takes_no_place_in_the_minute(
    api_client: Client, user: Any, settings: Any
) -> None:
    settings.AGENTSITE_QUOTA_MESSAGES_PER_MINUTE = 2
    settings.AGENTSITE_QUOTA_LIVE_TURNS = 1
    first, second = make_session(user), make_session(user)
    assert post(api_client, first.id).status_code == 202
    assert_quota_exceeded(post(api_client, second.id), "live_turns")

    assert post(api_client, first.id).status_code == 202  # joins the queued turn


def test_a_message_that_would_queue_a_turn_over_the_limit_is_refused(
    api_client: Client, other_api_client: Client, user: Any, other_user: Any, settings: Any
) -> None:
    settings.AGENTSITE_QUOTA_LIVE_TURNS = 2
    first, second, third = (make_session(user) for _ in range(3))
    assert post(api_client, first.id).status_code == 202
    assert post(api_client, second.id).status_code == 202

    refused = post(api_client, third.id)

    assert_quota_exceeded(refused, "live_turns")
    assert not Event.objects.filter(session=third).exists()
    assert not Run.objects.filter(session=third).exists()
    # Accepted work goes on: a message for a turn already queued joins its batch.
    assert post(api_client, first.id, "and this").status_code == 202
    assert Run.objects.filter(owner=user).count() == 2
    assert post(other_api_client, make_session(other_user).id).status_code == 202


def test_the_users_own_limit_wins_over_the_default(
    api_client: Client, user: Any, settings: Any
) -> None:
    settings.AGENTSITE_QUOTA_LIVE_TURNS = 1
    UserQuota.objects.create(user=user, live_turns=2)
    assert post(api_client, make_session(user).id).status_code == 202
    assert post(api_client, make_session(user).id).status_code == 202
    assert post(api_client, make_session(user).id).status_code == 429
