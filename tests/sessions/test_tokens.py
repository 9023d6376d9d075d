"""Continuation tokens: one token per position, old timestamped tokens still read."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core import signing

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
