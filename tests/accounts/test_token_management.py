"""A user lists, creates and revokes their own API tokens; tokens may expire."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken


def bearer(raw: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.mark.django_db
def test_a_user_creates_lists_and_revokes_a_token(user: Any) -> None:
    _, first = ApiToken.issue(user=user, name="laptop")
    created = bearer(first).post(
        "/api/tokens", {"name": "ci", "expires_in_days": 30}, content_type="application/json"
    )
    assert created.status_code == 201
    doc = created.json()
    assert doc["name"] == "ci" and doc["token"].startswith("ast_")
    assert doc["expires_at"] is not None
    second = doc["token"]
    assert bearer(second).get("/api/me").status_code == 200

    listed = bearer(first).get("/api/tokens").json()["tokens"]
    assert [t["name"] for t in listed] == ["ci", "laptop"]
    assert all("token" not in t for t in listed)  # the raw value is shown once

    assert bearer(first).delete(f"/api/tokens/{doc['id']}").status_code == 204
    refused = bearer(second).get("/api/me")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"


@pytest.mark.django_db
def test_another_users_token_is_not_found_and_stays(user: Any, other_user: Any) -> None:
    _, mine = ApiToken.issue(user=user)
    theirs, their_raw = ApiToken.issue(user=other_user)
    answer = bearer(mine).delete(f"/api/tokens/{theirs.pk}")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"
    assert theirs.pk not in [t["id"] for t in bearer(mine).get("/api/tokens").json()["tokens"]]
    assert bearer(their_raw).get("/api/me").status_code == 200


@pytest.mark.django_db
def test_an_expired_token_is_refused(user: Any) -> None:
    token, raw = ApiToken.issue(user=user, expires_in=timedelta(days=1))
    assert bearer(raw).get("/api/me").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert bearer(raw).get("/api/me").status_code == 401


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body", [{"expires_in_days": 0}, {"expires_in_days": 100000}, {"name": " "}, {"name": 5}]
)
def test_a_bad_token_request_is_422(user: Any, body: dict[str, Any]) -> None:
    _, raw = ApiToken.issue(user=user)
    answer = bearer(raw).post("/api/tokens", body, content_type="application/json")
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_request"


@pytest.mark.django_db
def test_revoke_api_token_by_prefix_and_by_user(user: Any, other_user: Any) -> None:
    token, raw = ApiToken.issue(user=user)
    ApiToken.issue(user=other_user)
    ApiToken.issue(user=other_user)
    out = StringIO()
    call_command("revoke_api_token", token.prefix, stdout=out)
    assert "Revoked 1 token." in out.getvalue()
    assert bearer(raw).get("/api/me").status_code == 401
    call_command("revoke_api_token", "--user", other_user.username, stdout=out)
    assert not ApiToken.objects.exists()
    with pytest.raises(CommandError, match="No such token"):
        call_command("revoke_api_token", "ast_nothing")


@pytest.mark.django_db
def test_create_api_token_with_an_expiry(user: Any) -> None:
    out = StringIO()
    call_command("create_api_token", user.username, "--expires-in-days", "7", stdout=out)
    token = ApiToken.objects.get()
    assert token.expires_at is not None
    assert timedelta(days=6) < token.expires_at - timezone.now() <= timedelta(days=7)


@pytest.mark.django_db
def test_an_unparsable_token_request_is_a_documented_400(user: Any) -> None:
    _, raw = ApiToken.issue(user=user)
    answer = bearer(raw).post("/api/tokens", "\x00", content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "bad_request"
