"""``/api/tokens``: a user lists, creates and revokes their own API tokens.

A token's raw value is shown once, when it is created; only its hash is kept.
Revoking deletes the token: every later request with it is a 401. Another
user's token is a 404, as every foreign object is.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Field, Router, Schema
from ninja.responses import Status

from accounts.models import ApiToken
from agentsite.core.errors import NotFound
from agentsite.web.auth import request_user
from agentsite.web.http import NOT_BLANK, Body, errors

router = Router(tags=["tokens"])
# Each operation keeps the operationId that clients generated from the OpenAPI document
# know it by (ninja would derive a new one from this module's name).

MAX_EXPIRY_DAYS = 3650


class TokenDoc(Schema):
    id: int
    name: str
    prefix: str = Field(description="The token's first characters, to recognise it by.")
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None = Field(description="None: valid until revoked.")


class TokenCreated(TokenDoc):
    token: str = Field(description="The raw token: shown this once, never again.")


class TokenList(Schema):
    tokens: list[TokenDoc] = Field(description="Newest first; expired tokens are left out.")


class TokenIn(Body):
    name: str = Field("", max_length=100, pattern=rf"^$|{NOT_BLANK}")
    expires_in_days: int | None = Field(None, ge=1, le=MAX_EXPIRY_DAYS)


def token_doc(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.pk,
        "name": token.name,
        "prefix": token.prefix,
        "created_at": token.created_at,
        "last_used_at": token.last_used_at,
        "expires_at": token.expires_at,
    }


@router.get(
    "/tokens",
    operation_id="agentsite_tokens_token_list",
    response={200: TokenList, **errors()},
    summary="Your API tokens",
)
def token_list(request: HttpRequest) -> dict[str, Any]:
    tokens = ApiToken.objects.unexpired().filter(user_id=request_user(request).pk).order_by("-pk")
    return {"tokens": [token_doc(token) for token in tokens]}


@router.post(
    "/tokens",
    operation_id="agentsite_tokens_token_create",
    response={201: TokenCreated, **errors(400, 422)},
    summary="Create an API token",
    description="The raw token is in this answer only. `expires_in_days` omitted: no expiry.",
)
def token_create(request: HttpRequest, body: TokenIn) -> Status[dict[str, Any]]:
    expires_in = timedelta(days=body.expires_in_days) if body.expires_in_days else None
    token, raw = ApiToken.issue(
        user=request_user(request), name=body.name.strip(), expires_in=expires_in
    )
    return Status(201, {**token_doc(token), "token": raw})


@router.delete(
    "/tokens/{token_id}",
    operation_id="agentsite_tokens_token_revoke",
    response={204: None, **errors(404, 422)},
    summary="Revoke an API token",
    description="Every later request with the token is a 401.",
)
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    deleted, _ = ApiToken.objects.filter(pk=token_id, user_id=request_user(request).pk).delete()
    if not deleted:
        raise NotFound("No such token.")
    return HttpResponse(status=204)
