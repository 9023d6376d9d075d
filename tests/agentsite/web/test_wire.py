"""Frames written straight to daphne's sockets (agentsite.web.wire), and the web
process's collector settings (agentsite.core.heap)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader

from agentsite.web.wire import Wire, WireInScope, text_frame, wire_of
from tests.conftest import BASE_DIR, subprocess_env


def parsed(data: bytes) -> Frame:
    """``data`` read back by the websockets library's own frame parser, as a client reads it."""
    reader = StreamReader()
    reader.feed_data(data)
    parser = Frame.parse(reader.read_exact, mask=False)
    try:
        next(parser)
    except StopIteration as done:
        frame: Frame = done.value
        assert reader.at_eof() or not reader.buffer, "bytes left over after the frame"
        return frame
    raise AssertionError("the parser wanted more bytes than the frame has")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x" * 125,  # the largest length in the first byte
        "x" * 126,  # a 16-bit length
        "é" * 40,  # 80 bytes: the length counts bytes, not characters
        "x" * 65_535,
        "x" * 65_536,  # a 64-bit length
        json.dumps({"seq": 1, "payload": {"text": "☃ " * 50_000}}),
    ],
)
def test_a_text_frame_reads_back_as_the_same_text(text: str) -> None:
    frame = parsed(text_frame(text))
    assert frame.opcode is Opcode.TEXT
    assert frame.fin
    assert not (frame.rsv1 or frame.rsv2 or frame.rsv3)
    assert bytes(frame.data).decode() == text


def test_only_daphne_s_send_has_a_wire() -> None:
    async def send(message: object) -> None:
        return None

    assert Wire.of(send) is None
    assert wire_of({"type": "websocket"}) is None


async def test_a_scope_without_daphne_passes_through_unchanged() -> None:
    seen: list[dict[str, object]] = []

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        seen.append(scope)

    async def send(message: object) -> None:
        return None

    scope: dict[str, object] = {"type": "websocket", "path": "/ws/"}
    await WireInScope(app)(scope, None, send)
    assert seen == [{"type": "websocket", "path": "/ws/"}]


def test_the_web_process_freezes_its_start_up_and_installs_no_reactor_of_its_own() -> None:
    script = (
        "import gc, json, sys, agentsite.asgi; "
        "print(json.dumps([gc.get_threshold(), gc.get_freeze_count(), "
        "'twisted.internet.reactor' in sys.modules]))"
    )
    env = {**subprocess_env(), "AGENTSITE_GC_THRESHOLDS": "40000,15,8"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    thresholds, frozen, reactor = json.loads(out.strip().splitlines()[-1])
    assert thresholds == [40000, 15, 8]
    # Finding daphne's connection never imports daphne: no Twisted reactor is installed
    # in a process that another server runs.
    assert reactor is False
    # Everything start-up built (Django, the URL patterns, the models) is frozen.
    assert frozen > 50_000
