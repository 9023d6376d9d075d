"""Log lines about one job or run name it: ``[job_id=…]``, ``[run_id=… session_id=…]``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agentsite.core.logcontext import LogContextFilter, log_context_bind, logged_with
from tests.conftest import ARTIFACTS, wait_until
from tests.jobs.factories import started_job_id, wait_for_status


def lines_naming(text: str) -> list[str]:
    return [
        line
        for path in ARTIFACTS.glob("worker-tools-*.log")
        for line in path.read_text(errors="replace").splitlines()
        if text in line
    ]


@pytest.mark.django_db(transaction=True)
def test_a_tool_that_raises_is_logged_with_its_job_id(api_client: Any, rq_workers: Any) -> None:
    job_id = started_job_id(api_client, "failing")
    wait_for_status(job_id, "failed")

    lines = wait_until(lambda: lines_naming(f"[job_id={job_id}]"), timeout=10)
    assert any("jobs.tools.failing" in line and "raised" in line for line in lines), lines


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.addFilter(LogContextFilter())
        self.setFormatter(logging.Formatter("%(name)s%(log_context)s: %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@logged_with("run_id")
async def turn(run_id: str, session_id: str, log: logging.Logger) -> None:
    log_context_bind(session_id=session_id)
    await asyncio.sleep(0.01)  # the other turn runs meanwhile on the same loop
    log.info("turn says %s", run_id)


async def test_concurrent_turns_each_log_their_own_ids() -> None:
    log = logging.getLogger("tests.turns")
    handler = Collected()
    log.addHandler(handler)
    try:
        await asyncio.gather(turn("run_a", "ses_a", log), turn("run_b", "ses_b", log))
        log.info("between turns")
    finally:
        log.removeHandler(handler)

    assert sorted(handler.lines) == [
        "tests.turns [run_id=run_a session_id=ses_a]: turn says run_a",
        "tests.turns [run_id=run_b session_id=ses_b]: turn says run_b",
        "tests.turns: between turns",
    ]
