"""/healthz tells anyone whether the site is up; what each part reports is for staff only
(logged in or with a token), as /metrics is."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agentsite.ops import health
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_queue_down(monkeypatch: pytest.MonkeyPatch) -> None:
    # A queue nobody listens on: the answer is 503 with details worth hiding.
    monkeypatch.setattr(health, "WORKER_QUEUES", ("nobody-listens",))


def test_an_anonymous_caller_learns_up_or_down_only() -> None:
    response = Client().get("/healthz")

    assert response.status_code == 503
    assert response.json() == {"status": "down"}


def test_a_logged_in_user_who_is_not_staff_learns_up_or_down_only(user: Any) -> None:
    client = Client()
    client.force_login(user)

    assert client.get("/healthz").json() == {"status": "down"}


def test_staff_see_every_part(make_user: Any) -> None:
    client = Client()
    client.force_login(make_user("operator", is_staff=True))
    body = client.get("/healthz").json()

    assert body["status"] == "down"
    assert body["workers"]["nobody-listens"]["ok"] is False
    assert body["workers"]["nobody-listens"]["workers"] == 0
    assert body["database"]["ok"] is True


def test_a_token_of_a_user_who_is_not_staff_learns_up_or_down_only(user: Any) -> None:
    response = api_client_for(user).get("/healthz")

    assert response.status_code == 503
    assert response.json() == {"status": "down"}


def test_a_token_of_a_staff_user_sees_every_part(make_user: Any) -> None:
    body = api_client_for(make_user("operator", is_staff=True)).get("/healthz").json()

    assert body["status"] == "down"
    assert body["workers"]["nobody-listens"]["ok"] is False
    assert body["database"]["ok"] is True


def test_an_invalid_token_learns_up_or_down_only() -> None:
    response = Client(headers={"Authorization": "Bearer ast_not-a-token"}).get("/healthz")

    assert response.json() == {"status": "down"}


def test_a_token_of_a_deactivated_user_learns_up_or_down_only(make_user: Any) -> None:
    user = make_user("former-operator", is_staff=True)
    client = api_client_for(user)
    user.is_active = False
    user.save()

    assert client.get("/healthz").json() == {"status": "down"}
