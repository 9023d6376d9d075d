"""A websocket client gets the log after its token, then live events, each once."""

from __future__ import annotations

from typing import Any

import pytest

from sessions.tokens import session_token_seq
from tests.sessions.test_stream_clients import (
    append,
    communicator,
    connect,
    cookie_for,
    frames,
    make_session,
    token_at,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_it_replays_after_the_token_then_streams_live(user: Any) -> None:
    session = await make_session(user, events=5)
    comm = communicator(session.id, headers=[await cookie_for(user)], after=token_at(session, 2))
    await connect(comm)

    replayed = await frames(comm, 3)
    assert [f["seq"] for f in replayed] == [3, 4, 5]
    assert [f["payload"]["text"] for f in replayed] == ["<3>", "<4>", "<5>"]
    assert set(replayed[0]) == {"seq", "kind", "payload", "token"}

    await append(session_id=session.id, kind="assistant_message", payload={"text": "live"})
    (live,) = await frames(comm, 1)
    assert (live["seq"], live["kind"], live["payload"]) == (
        6,
        "assistant_message",
        {"text": "live"},
    )
    assert await comm.receive_nothing(0.3)
    await comm.disconnect()


async def test_each_frame_token_resumes_right_after_that_frame(user: Any) -> None:
    session = await make_session(user, events=4)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    replayed = await frames(comm, 4)
    await comm.disconnect()
    assert [f["seq"] for f in replayed] == [1, 2, 3, 4]
    for frame in replayed:
        assert (
            session_token_seq(frame["token"], session_id=session.id, owner_id=user.pk)
            == frame["seq"]
        )

    resumed = communicator(session.id, headers=[await cookie_for(user)], after=replayed[1]["token"])
    await connect(resumed)
    assert [f["seq"] for f in await frames(resumed, 2)] == [3, 4]
    assert await resumed.receive_nothing(0.3)
    await resumed.disconnect()


async def test_an_empty_token_replays_the_whole_log(user: Any) -> None:
    session = await make_session(user, events=3)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    assert [f["seq"] for f in await frames(comm, 3)] == [1, 2, 3]
    await comm.disconnect()
