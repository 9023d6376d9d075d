from __future__ import annotations

from typing import Any

import pytest

from agentsite.core.errors import Invalid
from jobs.inline import blocking_tool_call


@pytest.mark.django_db
def test_a_blocking_tool_runs_inline(user: Any) -> None:
    result = blocking_tool_call(owner=user, tool="clock", args={})
    assert result["summary"] == "tick"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("sleepy", {}, "tool_is_async"),
        ("no_such_tool", {}, "unknown_tool"),
        ("clock", "not an object", "invalid_arguments"),
    ],
)
def test_a_bad_blocking_call_is_refused(user: Any, tool: str, args: Any, code: str) -> None:
    with pytest.raises(Invalid) as caught:
        blocking_tool_call(owner=user, tool=tool, args=args)
    assert caught.value.code == code
