"""Log lines about one job or run name it: ``[job_id=…]``, ``[run_id=… session_id=…]``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agentsite.core.logcontext import LogContextFilter, log_context_bind, logged_with
from sessions import runtime as runtime_module
from sessions.runtime import TurnRuntime
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


async def test_a_blocking_tool_s_thread_logs_with_its_turn_s_ids(monkeypatch: Any) -> None:
    """A blocking tool runs on the runtime's tool threads: its lines name the turn too."""
    log = logging.getLogger("tests.tools")

    def tool_execute(*, name: str, **kwargs: Any) -> tuple[Any, bool]:
        log.info("%s runs", name)
        return {"ok": True}, False

    monkeypatch.setattr(runtime_module, "tool_execute", tool_execute)
    monkeypatch.setattr(runtime_module, "blocking_tool_timeout", lambda name: 5.0)
    runtime = TurnRuntime(db_threads=1, tool_threads=1, close_connections=True)

    @logged_with("run_id")
    async def call(run_id: str) -> Any:
        log_context_bind(session_id="ses_t")
        return await runtime.tool_call(name="slow_lookup")

    handler = Collected()
    log.addHandler(handler)
    try:
        assert await call("run_t") == ({"ok": True}, False)
    finally:
        log.removeHandler(handler)
        runtime.tool_pool.shutdown()
        runtime.db_pool.shutdown()

    assert handler.lines == ["tests.tools [run_id=run_t session_id=ses_t]: slow_lookup runs"]
