from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from accounts.models import ApiToken


def test_create_api_token_prints_a_token_that_authenticates(user: object) -> None:
    out = StringIO()
    call_command("create_api_token", "alice", stdout=out)
    raw = out.getvalue().strip()
    response = Client().get("/api/me", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    assert response.json() == {"username": "alice"}


def test_only_a_hash_of_the_token_is_stored(user: object) -> None:
    out = StringIO()
    call_command("create_api_token", "alice", stdout=out)
    raw = out.getvalue().strip()
    stored = ApiToken.objects.get()
    assert raw not in (stored.token_hash, stored.prefix)
    assert stored.prefix == raw[:12]


def test_create_api_token_for_an_unknown_user_fails(db: None) -> None:
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("create_api_token", "nobody")


@pytest.mark.parametrize("header", [None, "Bearer nonsense", "Basic abc"])
def test_missing_or_bad_token_is_401_with_an_error_code(db: None, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = Client().get("/api/me", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_an_inactive_users_token_is_refused(user: Any) -> None:
    _, raw = ApiToken.issue(user=user)
    user.is_active = False
    user.save()
    response = Client().get("/api/me", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 401


def test_last_use_is_recorded_to_the_minute_not_on_every_call(user: Any) -> None:
    token, raw = ApiToken.issue(user=user)
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    assert client.get("/api/me").status_code == 200
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None
    assert client.get("/api/me").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == first


def test_create_api_token_without_a_username_issues_one_for_the_admin_login(
    make_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTSITE_ADMIN_USER", raising=False)
    make_user("admin")
    out = StringIO()
    call_command("create_api_token", stdout=out)
    assert ApiToken.objects.get().user.username == "admin"
    raw = out.getvalue().strip()
    response = Client().get("/api/me", headers={"Authorization": f"Bearer {raw}"})
    assert response.json() == {"username": "admin"}


def test_create_api_token_without_a_username_follows_the_chosen_admin_login(
    make_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSITE_ADMIN_USER", "operator")
    make_user("admin")
    make_user("operator")
    call_command("create_api_token", stdout=StringIO())
    assert ApiToken.objects.get().user.username == "operator"
