"""Continuation tokens: one token per position, old timestamped tokens still read."""

from __future__ import annotations

import zlib
from unittest import mock

import pytest
from django.core import signing
from django.test import override_settings
from django.utils.crypto import salted_hmac

import sessions.tokens
from sessions.tokens import (
    _SALT,
    BadToken,
    ForeignToken,
    run_token,
    run_token_seq,
    session_token,
    session_token_seq,
)


def test_a_position_has_the_same_token_whenever_it_is_read() -> None:
    # A poll that finds nothing new hands back the token the client holds, even
    # when the two reads fall in different seconds.
    with mock.patch("time.time", return_value=1_800_000_000.0):
        first = session_token(session_id="ses_a", owner_id=1, seq=5)
        first_run = run_token(run_id="run_a", owner_id=1, seq=5)
    with mock.patch("time.time", return_value=1_800_000_007.0):
        again = session_token(session_id="ses_a", owner_id=1, seq=5)
        again_run = run_token(run_id="run_a", owner_id=1, seq=5)
    assert first == again
    assert first_run == again_run
    assert session_token_seq(again, session_id="ses_a", owner_id=1) == 5


def test_tokens_issued_with_a_timestamp_still_resume() -> None:
    old = signing.dumps(["s", "ses_a", 1, 9], salt=_SALT, compress=True)
    assert old.count(":") == 2
    assert session_token_seq(old, session_id="ses_a", owner_id=1) == 9
    old_run = signing.dumps(["r", "run_a", 1, 3], salt=_SALT, compress=True)
    assert run_token_seq(old_run, run_id="run_a", owner_id=1) == 3
    with pytest.raises(ForeignToken):
        session_token_seq(old, session_id="ses_b", owner_id=1)


@pytest.mark.parametrize(
    "token",
    ["garbage", "a:b", "a:b:c", ":", "::", "x" * 500],
)
def test_garbage_is_a_bad_token(token: str) -> None:
    with pytest.raises(BadToken):
        session_token_seq(token, session_id="ses_a", owner_id=1)


def test_a_tampered_token_is_refused_and_another_owner_s_is_foreign() -> None:
    token = session_token(session_id="ses_a", owner_id=1, seq=5)
    payload, signature = token.split(":")
    with pytest.raises(BadToken):
        session_token_seq(f"{payload}x:{signature}", session_id="ses_a", owner_id=1)
    with pytest.raises(ForeignToken):
        session_token_seq(token, session_id="ses_a", owner_id=2)
    with pytest.raises(ForeignToken):
        run_token_seq(token, run_id="ses_a", owner_id=1)


def test_a_token_is_signed_without_compressing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every frame of every stream carries a token: compressing its few dozen bytes set up
    a zlib stream each time for a text Django then threw away (it never came out shorter).
    """
    compress_args: list[int] = []
    real = zlib.compress

    def counted(data: bytes, *args: object) -> bytes:
        compress_args.append(len(data))
        return real(data)

    monkeypatch.setattr(zlib, "compress", counted)  # as django.core.signing calls it
    token = session_token(session_id="ses_0123456789abcdef", owner_id=123456, seq=987654)
    assert run_token(run_id="run_0123456789abcdef", owner_id=123456, seq=987654)
    assert compress_args == []
    # The same text as the compressed form: no client's token changes.
    monkeypatch.undo()
    assert token == signing.Signer(salt=_SALT).sign_object(
        ["s", "ses_0123456789abcdef", 123456, 987654], compress=True
    )


def test_a_compressed_token_is_still_read() -> None:
    long_id = "ses_" + "a" * 200  # long and repetitive enough that compressing shortens it
    token = signing.Signer(salt=_SALT).sign_object(["s", long_id, 1, 7], compress=True)
    assert token.startswith(".")  # Django's mark of a compressed payload
    assert session_token_seq(token, session_id=long_id, owner_id=1) == 7


def test_the_signer_is_made_once_a_key_and_follows_a_rotated_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream signs a token for every frame: the signer (its key and salt looked up in
    the settings) is made once for the running keys, and made again when they change, so
    a rotated key signs new tokens while tokens of the key it replaced are still read."""
    made: list[object] = []
    real_init = signing.Signer.__init__

    def counted(self: signing.Signer, *args: object, **kwargs: object) -> None:
        made.append(self)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    with override_settings(SECRET_KEY="key-one-" + "x" * 50, SECRET_KEY_FALLBACKS=[]):
        monkeypatch.setattr(signing.Signer, "__init__", counted)
        old = [session_token(session_id="ses_a", owner_id=1, seq=n) for n in range(50)]
        assert session_token_seq(old[7], session_id="ses_a", owner_id=1) == 7
        assert len(made) <= 1
        monkeypatch.undo()
    with override_settings(
        SECRET_KEY="key-two-" + "y" * 50, SECRET_KEY_FALLBACKS=["key-one-" + "x" * 50]
    ):
        new = session_token(session_id="ses_a", owner_id=1, seq=7)
        assert new != old[7]  # signed with the new key
        assert session_token_seq(old[7], session_id="ses_a", owner_id=1) == 7
        assert session_token_seq(new, session_id="ses_a", owner_id=1) == 7
    with override_settings(SECRET_KEY="key-three-" + "z" * 50, SECRET_KEY_FALLBACKS=[]):
        with pytest.raises(BadToken):  # neither key is trusted any more
            session_token_seq(new, session_id="ses_a", owner_id=1)


def test_a_token_keys_no_hmac_of_its_own_and_reads_as_django_signs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each frame's token costs one HMAC over its text: the key derived from the secret
    and the salt, and the HMAC keyed with it, are set up once for the running key; the
    text is what Django's ``Signer.sign_object`` makes of the same list."""
    keyed: list[object] = []

    def counting(real: object) -> object:
        def salted(*args: object, **kwargs: object) -> object:
            keyed.append(args)
            return real(*args, **kwargs)  # type: ignore[operator]

        return salted

    monkeypatch.setattr(signing, "salted_hmac", counting(salted_hmac))
    monkeypatch.setattr(sessions.tokens, "salted_hmac", counting(salted_hmac), raising=False)
    with override_settings(SECRET_KEY="key-four-" + "w" * 50, SECRET_KEY_FALLBACKS=[]):
        tokens = [session_token(session_id="ses_é", owner_id=3, seq=n) for n in range(50)]
        tokens += [run_token(run_id="run_b", owner_id=3, seq=n) for n in range(50)]
        assert len(keyed) <= 1
        monkeypatch.undo()
        django_signer = signing.Signer(salt=_SALT)
        assert tokens[7] == django_signer.sign_object(["s", "ses_é", 3, 7])
        assert tokens[57] == django_signer.sign_object(["r", "run_b", 3, 7])
        assert django_signer.unsign_object(tokens[9]) == ["s", "ses_é", 3, 9]
        assert session_token_seq(tokens[9], session_id="ses_é", owner_id=3) == 9
