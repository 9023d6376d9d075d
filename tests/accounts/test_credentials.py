"""Whether the credential a live connection was opened with still holds (the database's word)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from accounts.credentials import Credential, credential_holds, session_digest
from accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def login_session(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return str(client.cookies[settings.SESSION_COOKIE_NAME].value)


def test_a_token_holds_until_it_is_revoked_or_expires(user: Any) -> None:
    token, _ = ApiToken.issue(user=user)
    credential = Credential(user_id=user.pk, token_id=token.pk)
    assert credential_holds(credential)

    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert not credential_holds(credential)

    token.delete()
    assert not credential_holds(credential)


def test_another_users_token_id_does_not_hold(user: Any, other_user: Any) -> None:
    token, _ = ApiToken.issue(user=other_user)
    assert not credential_holds(Credential(user_id=user.pk, token_id=token.pk))


def test_nothing_holds_for_a_deactivated_user(user: Any) -> None:
    token, _ = ApiToken.issue(user=user)
    key = login_session(user)
    user.is_active = False
    user.save()
    assert not credential_holds(Credential(user_id=user.pk, token_id=token.pk))
    assert not credential_holds(Credential(user_id=user.pk, session_key=key))


def test_a_login_session_ends_with_a_logout_or_a_new_password(user: Any) -> None:
    first, second = login_session(user), login_session(user)
    assert credential_holds(Credential(user_id=user.pk, session_key=first))

    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = first
    client.post("/logout/")
    assert not credential_holds(Credential(user_id=user.pk, session_key=first))
    assert credential_holds(Credential(user_id=user.pk, session_key=second))

    user.set_password("a-new-password-123")
    user.save()
    assert not credential_holds(Credential(user_id=user.pk, session_key=second))


def test_a_logout_message_names_only_its_session(user: Any) -> None:
    credential = Credential(user_id=user.pk, session_key="k" * 32)
    assert credential.ended_by({"type": "credentials.changed", "session": session_digest("k" * 32)})
    assert not credential.ended_by({"type": "credentials.changed", "session": session_digest("x")})
    assert not credential.ended_by({"type": "credentials.changed", "session": ""})
    token_credential = Credential(user_id=user.pk, token_id=1)
    assert not token_credential.ended_by(
        {"type": "credentials.changed", "session": session_digest("k" * 32)}
    )
