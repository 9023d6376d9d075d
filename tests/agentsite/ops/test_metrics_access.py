"""/metrics answers staff users (by login or API token) and nobody else."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.agentsite.ops.scrape import samples_of, value
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db


def test_anonymous_callers_are_asked_for_credentials(client: Client) -> None:
    response = client.get("/metrics")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response["WWW-Authenticate"] == "Bearer"


def test_a_wrong_token_is_refused(client: Client) -> None:
    response = client.get("/metrics", headers={"Authorization": "Bearer not-a-token"})

    assert response.status_code == 401


def test_users_who_are_not_staff_are_forbidden(client: Client, user: Any) -> None:
    client.force_login(user)
    by_login = client.get("/metrics")
    by_token = api_client_for(user).get("/metrics")

    assert by_login.status_code == 403
    assert by_login.json()["error"]["code"] == "forbidden"
    assert by_token.status_code == 403


def test_a_staff_login_reads_the_metrics(client: Client, make_user: Any) -> None:
    client.force_login(make_user("operator", is_staff=True))
    response = client.get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples = samples_of(response.content.decode())
    assert value(samples, "agentsite_database_up") == 1
    assert value(samples, "agentsite_redis_up") == 1
    assert value(samples, "agentsite_jobs", status="queued") == 0


def test_a_staff_token_reads_the_metrics(make_user: Any) -> None:
    response = api_client_for(make_user("prometheus", is_staff=True)).get("/metrics")

    assert response.status_code == 200
    samples = samples_of(response.content.decode())
    assert value(samples, "agentsite_queue_depth", queue="tools") is not None
