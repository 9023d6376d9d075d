"""What a live connection stands on, and telling its connections when that may have gone.

A websocket or an event stream authenticates once, when it opens, and may stay
open for hours. It keeps its ``Credential``: the API token it was opened with,
or the login session of its cookie. Revoking or deleting a token (the API, the
``revoke_api_token`` command, the admin), deactivating or deleting a user,
changing their password, and logging out each send ``credentials.changed`` to
the user's channel-layer group (after the change commits). Every live
connection of that user re-reads its credential from the database then, and
ends if it no longer holds; a logout names its session (by a digest), whose
connections end at once. The message is only a prompt: streams also re-check
on their idle tick, so a message Redis lost delays the end, never prevents it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Literal, TypedDict

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.http import HttpRequest
from django.utils.crypto import constant_time_compare

from accounts.models import ApiToken, unexpired_at
from agentsite.compat.django import CompiledQuery
from jobs.live import group_send

log = logging.getLogger(__name__)


class CredentialRevoked(Exception):
    """The credential a live connection was opened with no longer holds."""


class CredentialsChangedMessage(TypedDict):
    type: Literal["credentials.changed"]
    # The digest of the login session that ended, or "" (re-check every credential).
    session: str


def session_digest(session_key: str) -> str:
    """A session key's stand-in on the channel layer (the key itself is a secret)."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Credential:
    """A user, and what they authenticated with: an API token's id or a login session's key."""

    user_id: int
    token_id: int | None = None
    session_key: str | None = None

    def ended_by(self, message: CredentialsChangedMessage) -> bool:
        """Whether ``message`` says this credential's login session ended."""
        ended = message.get("session", "")
        return (
            bool(ended)
            and self.session_key is not None
            and (constant_time_compare(ended, session_digest(self.session_key)))
        )


def credentials_group(user_id: int) -> str:
    """The channel-layer group every live connection of one user follows."""
    return f"{settings.REDIS_PREFIX}.credentials.{user_id}"


# Every live stream re-reads its credential now and then: compiled once. A token's
# expiry is judged after the read (``unexpired_at``), as for a request's token.
_ACTIVE_USER: CompiledQuery[Any] = CompiledQuery(
    lambda user_id: get_user_model().objects.filter(pk=user_id, is_active=True), user_id=int
)
_TOKEN_EXPIRY: CompiledQuery[Any] = CompiledQuery(
    lambda token_id, user_id: ApiToken.objects.filter(pk=token_id, user_id=user_id).values_list(
        "expires_at", flat=True
    ),
    token_id=int,
    user_id=int,
)


def credential_holds(credential: Credential) -> bool:
    """Whether ``credential`` still authenticates its user (read from the database)."""
    user = _ACTIVE_USER.one_or_none(user_id=int(credential.user_id))
    if user is None:
        return False
    if credential.token_id is not None:
        expiry = _TOKEN_EXPIRY.all(token_id=int(credential.token_id), user_id=user.pk)
        return bool(expiry) and unexpired_at(expiry[0])
    if credential.session_key is not None:
        return login_session_holds(credential.session_key, user)
    return True


def login_session_holds(session_key: str, user: AbstractBaseUser) -> bool:
    """As Django's ``get_user``: the session exists, names the user, and matches the password."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    data: dict[str, Any] = store.load()  # {} once deleted (a logout) or expired
    if str(data.get(SESSION_KEY, "")) != str(user.pk):
        return False
    stored = str(data.get(HASH_SESSION_KEY, ""))
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return any(constant_time_compare(stored, current) for current in hashes)


def credentials_changed(*, user_id: int, session_key: str | None = None) -> None:
    """Tell the user's live connections to re-check their credential, once this commits."""
    message: CredentialsChangedMessage = {
        "type": "credentials.changed",
        "session": session_digest(session_key) if session_key else "",
    }
    group = credentials_group(user_id)
    transaction.on_commit(lambda: group_send(group, message))


# --- what prompts the re-check ------------------------------------------------------------


def on_token_changed(sender: type[ApiToken], instance: ApiToken, **kwargs: Any) -> None:
    """A token revoked (deleted, by any path) or edited (its expiry moved)."""
    if kwargs.get("created"):
        return
    credentials_changed(user_id=instance.user_id)


def on_user_changed(sender: Any, instance: AbstractBaseUser, **kwargs: Any) -> None:
    """A user deactivated, deleted, or given a new password (which ends login sessions)."""
    fields = kwargs.get("update_fields")
    if kwargs.get("created") or (fields is not None and set(fields) <= {"last_login"}):
        return  # a login records its time: nothing ends
    credentials_changed(user_id=instance.pk)


def on_logged_out(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    if user is None:
        return
    credentials_changed(user_id=user.pk, session_key=request.session.session_key)


def connect_signals() -> None:
    user_model = get_user_model()
    uid = "agentsite-credentials"
    post_delete.connect(on_token_changed, sender=ApiToken, dispatch_uid=f"{uid}-token-delete")
    post_save.connect(on_token_changed, sender=ApiToken, dispatch_uid=f"{uid}-token-save")
    post_save.connect(on_user_changed, sender=user_model, dispatch_uid=f"{uid}-user-save")
    post_delete.connect(on_user_changed, sender=user_model, dispatch_uid=f"{uid}-user-delete")
    user_logged_out.connect(on_logged_out, dispatch_uid=f"{uid}-logout")
