from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentsite.compat.django import CompiledQuery


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def unexpired_at(expires_at: datetime | None) -> bool:
    """Whether a token with this expiry still holds now: ``unexpired()`` for one row read."""
    return expires_at is None or expires_at > timezone.now()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def for_raw_token(self, raw: str) -> ApiToken | None:
        """The unexpired token whose raw value is ``raw``, with its user, or None.

        Every authenticated request asks this: the query is compiled once
        (``_TOKEN_BY_HASH``), and the expiry is judged here rather than in it.
        """
        token = _TOKEN_BY_HASH.one_or_none(token_hash=token_hash(raw))
        return token if token is not None and unexpired_at(token.expires_at) else None

    def unexpired(self) -> ApiTokenQuerySet:
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


class ApiToken(models.Model):
    """A Bearer token for the REST API, the websocket and MCP. Only a hash is kept."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # None: valid until revoked (deleted).
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        db_table = "agentsite_apitoken"  # its table since agentsite/migrations/0001
        verbose_name = "API token"
        verbose_name_plural = "API tokens"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @classmethod
    def issue(
        cls, *, user: AbstractBaseUser, name: str = "", expires_in: timedelta | None = None
    ) -> tuple[ApiToken, str]:
        """Create a token for ``user``; the raw value is returned once and never stored."""
        raw = "ast_" + secrets.token_urlsafe(32)
        expires_at = timezone.now() + expires_in if expires_in is not None else None
        token = cls.objects.create(
            user_id=user.pk,
            name=name,
            prefix=raw[:12],
            token_hash=token_hash(raw),
            expires_at=expires_at,
        )
        return token, raw


_TOKEN_BY_HASH: CompiledQuery[ApiToken] = CompiledQuery(
    lambda token_hash: ApiToken.objects.select_related("user").filter(token_hash=token_hash),
    token_hash=str,
)


class UserQuota(models.Model):
    """One user's own limits; a blank field means the AGENTSITE_QUOTA_* default, 0 no limit."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quota"
    )
    live_jobs = models.PositiveIntegerField(
        null=True, blank=True, help_text="Jobs queued or running at once."
    )
    live_turns = models.PositiveIntegerField(
        null=True, blank=True, help_text="Model turns queued or running at once."
    )
    messages_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Messages sent in any 60 seconds."
    )
    mcp_sessions = models.PositiveIntegerField(
        null=True, blank=True, help_text="MCP sessions open at once (per web process)."
    )
    pending_approvals = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests for approval and questions pending at once."
    )

    class Meta:
        db_table = "agentsite_userquota"  # its table since agentsite/migrations/0003
        verbose_name = "user quota"
        verbose_name_plural = "user quotas"

    def __str__(self) -> str:
        return f"quotas of {self.user}"
