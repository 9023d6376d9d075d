"""Bad client frames get an error frame; the connection and the stream carry on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.sessions.test_stream_clients import (
    append,
    communicator,
    connect,
    cookie_for,
    frames,
    make_session,
)

pytestmark = pytest.mark.django_db(transaction=True)

BAD_FRAMES = [
    ("not json", "bad_frame"),
    ("[1, 2, 3]", "bad_frame"),
    ('"just a string"', "bad_frame"),
    ('{"no": "type"}', "bad_frame"),
    ('{"type": "launch_missiles"}', "bad_frame"),
    ('{"type": "message"}', "bad_frame"),
    ('{"type": "message", "text": "   "}', "bad_frame"),
    ('{"type": "message", "text": 42}', "bad_frame"),
    ('{"type": "stop_job"}', "bad_frame"),
    ("[" * 100_000, "too_large"),
    (json.dumps({"type": "message", "text": "x" * 40_000}), "too_large"),
    ("[" * 5000 + "]" * 5000, "bad_frame"),
]


async def test_each_malformed_frame_gets_an_error_frame_and_the_socket_stays_open(
    user: Any,
) -> None:
    session = await make_session(user, events=1)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    assert [f["seq"] for f in await frames(comm, 1)] == [1]

    for text, code in BAD_FRAMES:
        await comm.send_to(text_data=text)
        (reply,) = await frames(comm, 1)
        assert reply["type"] == "error" and reply["code"] == code, (text[:40], reply)
        assert reply["message"]

    await comm.send_to(bytes_data=b"\x00\x01binary")
    (reply,) = await frames(comm, 1)
    assert reply["code"] == "bad_frame"

    await comm.send_to(text_data='{"type": "ping"}')
    assert (await frames(comm, 1))[0] == {"type": "pong"}
    await append(session_id=session.id, kind="assistant_delta", payload={"text": "still live"})
    assert (await frames(comm, 1))[0]["seq"] == 2
    await comm.disconnect()


async def test_stopping_someone_elses_job_is_an_error_frame(user: Any) -> None:
    session = await make_session(user)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    await comm.send_to(text_data='{"type": "stop_job", "job_id": "job_not_mine"}')
    (reply,) = await frames(comm, 1)
    assert (reply["type"], reply["code"]) == ("error", "not_found")
    await comm.disconnect()


async def test_interrupting_an_idle_session_is_an_error_frame(user: Any) -> None:
    session = await make_session(user)
    comm = communicator(session.id, headers=[await cookie_for(user)])
    await connect(comm)
    await comm.send_to(text_data='{"type": "interrupt"}')
    (reply,) = await frames(comm, 1)
    assert (reply["type"], reply["code"]) == ("error", "no_active_run")
    await comm.disconnect()
