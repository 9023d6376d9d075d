"""Continuation tokens: opaque to clients, signed, bound to a session and its owner.

A session token names a position in a session's log; a run token names a
position in one run's stream. Neither grants access by itself: the caller must
still be the owner, and a token minted for another session or user is treated
as not found.

A position has one token: tokens are signed without a timestamp, so reading
the same position twice (a poll that finds nothing new, a replay) gives the
client back the very token it holds. Tokens issued with a timestamp (the
`signing.dumps` form: payload, time, signature) are still read.
"""

from __future__ import annotations

import functools
import hmac
import json

from django.conf import settings
from django.core import signing
from django.utils.crypto import salted_hmac

from agentsite.core.errors import BadRequest, NotFound

_SALT = "agentsite.continuation"


class BadToken(BadRequest):
    """The token is not one agentsite issued (tampered, truncated, garbage)."""

    def __init__(self, message: str) -> None:
        super().__init__("bad_token", message)


class ForeignToken(NotFound):
    """A genuine token, but for another session, run or user: not found, as their things are."""

    def __init__(self) -> None:
        super().__init__("No such continuation token for this resource.")


# Not compressed: a token's few dozen bytes never shrink (Django keeps the plain form
# then), so ``compress=True`` gave the same text for a zlib stream set up and thrown away
# at every frame. Compressed tokens, if any were issued, are still read.
def session_token(*, session_id: str, owner_id: int, seq: int) -> str:
    return _signer().sign_list(["s", session_id, owner_id, seq])


def run_token(*, run_id: str, owner_id: int, seq: int) -> str:
    return _signer().sign_list(["r", run_id, owner_id, seq])


class _Signer(signing.Signer):
    """Django's ``Signer`` with its current key's HMAC keyed once, not at every signature.

    A stream signs a token for each event it sends, and Django derives the HMAC key
    from the secret and salt, then keys a new HMAC, at every one: here that keyed
    state is copied instead. ``sign_list`` gives the text ``sign_object`` gives for a
    list of strings and integers (``tests/sessions/test_tokens.py`` holds the two
    equal), with one JSON encoder for all tokens. Signatures under a fallback key,
    read only, take Django's own path.
    """

    _json = json.JSONEncoder(separators=(",", ":"))

    def __init__(self, *, key: str, salt: str, fallback_keys: tuple[str, ...]) -> None:
        super().__init__(key=key, salt=salt, fallback_keys=[*fallback_keys])
        self._keyed: hmac.HMAC = salted_hmac(
            f"{salt}signer", b"", secret=key, algorithm=self.algorithm
        )

    def signature(self, value: str | bytes, key: str | bytes | None = None) -> str:
        if key is not None and key != self.key:
            return super().signature(value, key)
        mac = self._keyed.copy()
        mac.update(value.encode() if isinstance(value, str) else value)
        return signing.b64_encode(mac.digest()).decode()

    def sign_list(self, items: list[str | int]) -> str:
        value = signing.b64_encode(self._json.encode(items).encode("latin-1")).decode()
        return f"{value}{self.sep}{self.signature(value)}"


def _signer() -> _Signer:
    """The signer of the running keys: one a key, not one a frame."""
    return _signer_for(settings.SECRET_KEY, tuple(settings.SECRET_KEY_FALLBACKS))


@functools.lru_cache(maxsize=4)
def _signer_for(key: str, fallback_keys: tuple[str, ...]) -> _Signer:
    return _Signer(key=key, salt=_SALT, fallback_keys=fallback_keys)


def _load(token: str) -> list[object]:
    try:
        if token.count(":") == 2:
            data = signing.loads(token, salt=_SALT)  # issued with a timestamp
        else:
            data = _signer().unsign_object(token)
    except (signing.BadSignature, ValueError, TypeError) as exc:
        raise BadToken("continuation token is malformed or was tampered with") from exc
    if not isinstance(data, list) or len(data) != 4 or not isinstance(data[3], int):
        raise BadToken("continuation token is malformed")
    return data


def session_token_seq(token: str | None, *, session_id: str, owner_id: int) -> int:
    """The seq a session token points at; an empty token means the start of the log."""
    if not token:
        return 0
    kind, bound_id, bound_owner, seq = _load(token)
    if kind != "s" or bound_id != session_id or bound_owner != owner_id:
        raise ForeignToken()
    assert isinstance(seq, int)
    return seq


def run_token_seq(token: str | None, *, run_id: str, owner_id: int) -> int | None:
    """The seq a run token points at; None for an empty token (the run's start)."""
    if not token:
        return None
    kind, bound_id, bound_owner, seq = _load(token)
    if kind != "r" or bound_id != run_id or bound_owner != owner_id:
        raise ForeignToken()
    assert isinstance(seq, int)
    return seq
