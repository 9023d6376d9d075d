"""now: the time in UTC, and in a named time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from jobs.tools.clock import now_tool as NOW
from jobs.tools.context import LocalToolContext


def test_it_returns_utc_iso_time() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    result = NOW.run({}, LocalToolContext())
    after = datetime.now(UTC)

    moment = datetime.fromisoformat(result["utc"])
    assert result["utc"].endswith("Z")
    assert before <= moment <= after
    assert result["summary"] == result["utc"]


def test_a_time_zone_adds_the_local_time() -> None:
    result = NOW.run({"timezone": "Asia/Kolkata"}, LocalToolContext())

    local = datetime.fromisoformat(result["local"])
    assert local.utcoffset() is not None
    assert local.utcoffset().total_seconds() == 5.5 * 3600  # type: ignore[union-attr]
    assert local == datetime.fromisoformat(result["utc"])
    assert result["summary"].endswith("(Asia/Kolkata)")


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown time zone"):
        NOW.validate({"timezone": "Mars/Olympus_Mons"})
