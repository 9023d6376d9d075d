"""``now``: the current time, in UTC and optionally in a named time zone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobs.registry import ToolContext, tool
from jobs.tools.running import tool_input


class NowInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timezone: str | None = Field(
        default=None,
        max_length=64,
        description="An IANA time zone name such as 'Europe/Paris' to also get the local time.",
    )

    @field_validator("timezone")
    @classmethod
    def timezone_exists(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}; use an IANA name") from exc
        return value


def now(args: Any, ctx: ToolContext | None = None) -> dict[str, Any]:
    params = tool_input(NowInput, args)
    utc = datetime.now(UTC).replace(microsecond=0)
    result: dict[str, Any] = {
        "utc": utc.isoformat().replace("+00:00", "Z"),
        "unix": int(utc.timestamp()),
        "weekday": utc.strftime("%A"),
    }
    summary = result["utc"]
    if params.timezone:
        local = utc.astimezone(ZoneInfo(params.timezone))
        result.update(
            timezone=params.timezone,
            local=local.isoformat(),
            local_weekday=local.strftime("%A"),
            utc_offset=local.strftime("%z"),
        )
        summary = f"{local.isoformat()} ({params.timezone})"
    return {"summary": summary, **result}


now_tool = tool(
    name="now",
    description=(
        "The current date and time in UTC (ISO 8601), and in a time zone when one is given."
    ),
    input_model=NowInput,
    kind="blocking",
    default_timeout_s=5.0,
    max_timeout_s=5.0,
)(now)
