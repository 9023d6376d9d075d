"""A pytest plugin that streams one JSON line per finished test to a file.

``run_tests`` starts pytest with ``-p agentsite_live_report`` and the file path
in ``AGENTSITE_REPORT_PATH``, then tails the file: parsing pytest's terminal
output would break on the first plugin that changes it. This module is loaded
inside the workspace's pytest process, so it imports nothing from agentsite.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

import pytest

_MESSAGE_LIMIT = 2000
_TRACEBACK_LIMIT = 8000


class LiveReport:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8", buffering=1)
        self._reports: dict[str, list[Any]] = {}

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.write({"event": "collected", "count": len(session.items)})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.write(
                {
                    "event": "collection_error",
                    "nodeid": report.nodeid,
                    "message": _short(report.longreprtext.strip().splitlines()[-1:]),
                    "traceback": report.longreprtext[-_TRACEBACK_LIMIT:],
                }
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._reports.setdefault(report.nodeid, []).append(report)
        if report.when == "teardown":
            self.write(_test_record(report.nodeid, self._reports.pop(report.nodeid)))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write({"event": "finished", "exitstatus": int(exitstatus)})


def _short(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines)[:_MESSAGE_LIMIT]


def _message(report: Any) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)[:_MESSAGE_LIMIT]
    if isinstance(report.longrepr, tuple):  # skips: (path, line, reason)
        return str(report.longrepr[-1])[:_MESSAGE_LIMIT]
    return _short(str(report.longrepr).strip().splitlines()[-1:])


def _test_record(nodeid: str, reports: list[Any]) -> dict[str, Any]:
    """Fold the setup/call/teardown reports of one test into one outcome."""
    outcome, message, traceback = "passed", "", ""
    for report in reports:
        if report.when == "setup" and report.failed:
            outcome = "error"
        elif report.when == "setup" and report.skipped:
            outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call":
            if hasattr(report, "wasxfail"):
                outcome = "xfailed" if report.skipped else "xpassed"
            else:
                outcome = report.outcome
        elif report.when == "teardown" and report.failed and outcome == "passed":
            outcome = "error"
        else:
            continue
        if report.failed or report.skipped:
            message = _message(report)
            if report.failed:
                traceback = report.longreprtext[-_TRACEBACK_LIMIT:]
    record: dict[str, Any] = {
        "event": "test",
        "nodeid": nodeid,
        "outcome": outcome,
        "duration": round(sum(r.duration for r in reports), 4),
    }
    if message:
        record["message"] = message
    if traceback:
        record["traceback"] = traceback
    return record


def _watch_parent(parent_pid: int) -> None:
    """End the whole test run if the process that started it is gone.

    The run has its own process group so that it can be stopped as a whole; the
    flip side is that a worker killed with SIGKILL would leave it running.
    """
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os.killpg(os.getpgid(0), signal.SIGKILL)


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("AGENTSITE_REPORT_PATH")
    if not path or hasattr(config, "_agentsite_live_report"):
        return
    report = LiveReport(path)
    config._agentsite_live_report = report  # type: ignore[attr-defined]
    config.pluginmanager.register(report, "agentsite_live_report_instance")
    parent = os.environ.get("AGENTSITE_PARENT_PID")
    if parent and parent.isdigit():
        threading.Thread(target=_watch_parent, args=(int(parent),), daemon=True).start()


def pytest_unconfigure(config: pytest.Config) -> None:
    report = getattr(config, "_agentsite_live_report", None)
    if report is not None:
        report.close()
