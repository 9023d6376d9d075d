"""tasks/list (2025-11-25) pages through the caller's own tasks, newest first."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.mcp.calls import TASKS_PAGE_SIZE, McpCallError, legacy_task_list
from jobs.models import Job

pytestmark = pytest.mark.django_db


def test_tasks_are_listed_in_pages_with_a_cursor(user: Any, other_user: Any) -> None:
    mine = [Job.objects.create(owner=user, tool="mcp_nap", timeout_s=60).id for _ in range(51)]
    Job.objects.create(owner=other_user, tool="mcp_nap", timeout_s=60)

    first = legacy_task_list(owner=user, cursor=None)
    second = legacy_task_list(owner=user, cursor=first["nextCursor"])

    assert len(first["tasks"]) == TASKS_PAGE_SIZE
    assert "nextCursor" not in second
    listed = [task["taskId"] for task in first["tasks"] + second["tasks"]]
    assert sorted(listed) == sorted(mine)
    assert all(task["status"] == "working" for task in first["tasks"])


def test_a_made_up_cursor_is_invalid_params(user: Any) -> None:
    with pytest.raises(McpCallError) as caught:
        legacy_task_list(owner=user, cursor="page-two")
    assert caught.value.code == -32602
