"""What a follower is sent for each event: its frame, signed and encoded once per process."""

from __future__ import annotations

import functools
import json
from typing import TypedDict

from sessions.payloads import EventPayload
from sessions.tokens import run_token, session_token


class Frame(TypedDict):
    """What a follower is sent for one event: the websocket's frame, an SSE event's data."""

    seq: int
    kind: str
    payload: EventPayload
    token: str


# Followers of one session in one process all need the same token for the same
# event: sign it once, not once per connection.
@functools.lru_cache(maxsize=4096)
def frame_token(kind: str, bound_id: str, owner_id: int, seq: int) -> str:
    if kind == "s":
        return session_token(session_id=bound_id, owner_id=owner_id, seq=seq)
    return run_token(run_id=bound_id, owner_id=owner_id, seq=seq)


# Frames as JSON text, by token (one per event and follower kind): every local
# follower of a session is sent the same text, encoded once.
_frame_texts: dict[str, str] = {}
FRAME_TEXTS_MAX = 4096


def frame_json(frame: Frame) -> str:
    """``frame`` as the compact JSON a websocket frame or an SSE ``data:`` line carries."""
    text = _frame_texts.get(frame["token"])
    if text is None:
        text = json.dumps(frame, separators=(",", ":"))
        if len(_frame_texts) >= FRAME_TEXTS_MAX:
            del _frame_texts[next(iter(_frame_texts))]
        _frame_texts[frame["token"]] = text
    return text
