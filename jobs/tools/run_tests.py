"""``run_tests``: pytest on a path of the workspace, one partial result per test.

pytest runs in a subprocess with its own process group, so that stopping it
(cancel, deadline) stops everything the tests started too, inside the sandbox of
``jobs/tools/sandbox.py`` (no secrets, no database, no network) with a scrubbed
environment and a home directory of its own. Results come from a small plugin
(``pytest_plugin/agentsite_live_report.py``) that writes one JSON line per
finished test to a file this tool tails.

Only test files are run: ``path`` names a directory, a file named like one of
pytest's test files (``test_*.py``, ``*_test.py``), or a test in one; anything
else would have pytest import a module of the workspace and run its top-level code.
"""

from __future__ import annotations

import fnmatch
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobs.registry import ToolCancelled, ToolContext, tool
from jobs.tools.running import stop_requested, tool_input, tool_setting
from jobs.tools.sandbox import SETUP_FAILED, SandboxUnavailable, sandboxed
from jobs.tools.workspace_paths import (
    WorkspacePathError,
    server_paths_hidden,
    workspace_path,
    workspace_relative,
    workspace_root,
)

PLUGIN_DIR = Path(__file__).resolve().parent / "pytest_plugin"
PLUGIN_NAME = "agentsite_live_report"
POLL_S = 0.1
GRACE_S = 1.0
MAX_FAILURES_LISTED = 100
MAX_TRACEBACKS = 20
TRACEBACK_LIMIT = 2000
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
OUTCOME_ORDER = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py")


class RunTestsInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        default=".",
        max_length=500,
        description=(
            "What to test, relative to the workspace root: a directory, a test file, or a "
            "pytest node id such as 'tests/test_orders.py::test_refund'. Defaults to the "
            "whole workspace."
        ),
    )
    keyword: str | None = Field(
        default=None,
        max_length=200,
        description="Only run tests whose names match this pytest -k expression, e.g. 'refund'.",
    )
    max_failures: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Stop the run after this many failures (pytest --maxfail).",
    )

    @field_validator("path")
    @classmethod
    def path_is_a_test_directory_or_file(cls, value: str) -> str:
        target = workspace_path(value.partition("::")[0] or ".")
        if target.is_dir():
            return value
        if not any(fnmatch.fnmatchcase(target.name, p) for p in TEST_FILE_PATTERNS):
            raise WorkspacePathError(
                f"{value.partition('::')[0]!r} is not a test file: name a directory or a file "
                "named test_*.py or *_test.py"
            )
        return value

    @field_validator("keyword")
    @classmethod
    def keyword_is_not_an_option(cls, value: str | None) -> str | None:
        if value is not None and value.lstrip().startswith("-"):
            raise ValueError("the keyword expression may not start with '-'")
        return value


class Tally:
    """Counts and failures of one run, built from the plugin's records."""

    def __init__(self) -> None:
        self.collected: int | None = None
        self.done = 0
        self.counts: Counter[str] = Counter()
        self.failures: list[dict[str, Any]] = []
        self.failing_files: list[str] = []
        self.exitstatus: int | None = None

    def add_failure(self, record: dict[str, Any]) -> None:
        path = record["nodeid"].split("::", 1)[0] or "."
        if path not in self.failing_files:
            self.failing_files.append(path)
        if len(self.failures) >= MAX_FAILURES_LISTED:
            return
        failure = {"nodeid": record["nodeid"], "message": record.get("message", "")}
        if len(self.failures) < MAX_TRACEBACKS and record.get("traceback"):
            failure["traceback"] = record["traceback"][-TRACEBACK_LIMIT:]
        self.failures.append(failure)


def outcome_key(outcome: str) -> str:
    return "errors" if outcome == "error" else outcome


def handle_record(record: dict[str, Any], tally: Tally, ctx: ToolContext) -> None:
    event = record.get("event")
    if event == "collected":
        tally.collected = int(record["count"])
        ctx.progress(0.0, f"collected {tally.collected} tests")
    elif event == "collection_error":
        tally.counts["errors"] += 1
        tally.add_failure(record)
    elif event == "test":
        tally.done += 1
        tally.counts[outcome_key(record["outcome"])] += 1
        if record["outcome"] in ("failed", "error"):
            tally.add_failure(record)
        item = {k: record[k] for k in ("nodeid", "outcome", "duration")}
        if record["outcome"] in ("failed", "error") and record.get("message"):
            item["message"] = record["message"]
        ctx.partial(item)
        total = tally.collected or tally.done
        ctx.progress(
            min(tally.done / total, 1.0) if total else None,
            f"{tally.done}/{total} {record['outcome']} {record['nodeid']}",
        )
    elif event == "finished":
        tally.exitstatus = int(record["exitstatus"])


def summary_line(counts: Counter[str], failing_files: list[str]) -> str:
    parts = [
        f"{counts[key]} {'error' if key == 'errors' and counts[key] == 1 else key}"
        for key in OUTCOME_ORDER
        if counts[key]
    ]
    if not parts:
        return "no tests ran"
    line = ", ".join(parts)
    if failing_files:
        shown = ", ".join(failing_files[:3])
        more = f", +{len(failing_files) - 3} more" if len(failing_files) > 3 else ""
        line += f" ({shown}{more})"
    return line


def subprocess_env(report_path: Path, scratch: Path) -> dict[str, str]:
    """A minimal environment: the tests are workspace code and see none of our secrets
    (no SECRET_KEY, DATABASE_URL, REDIS_URL, API keys), with a home and a TMPDIR of their own."""
    env = {key: os.environ[key] for key in ("PATH", "LANG", "LC_ALL") if key in os.environ}
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        PYTHONPATH=str(PLUGIN_DIR),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        AGENTSITE_REPORT_PATH=str(report_path),
    )
    if workspace_python() == sys.executable:
        # The server's own interpreter: the pytest plugins installed beside it are the
        # server's (pytest-django, xdist, Playwright, Locust, ...), not the workspace's.
        # The tests get plain pytest, and pytest starts in a tenth of the time.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def workspace_python() -> str:
    return str(tool_setting("AGENTSITE_WORKSPACE_PYTHON", sys.executable))


def pytest_argv(args: RunTestsInput, root: Path, scratch: Path) -> list[str]:
    file_part, separator, rest = args.path.partition("::")
    target = workspace_relative(workspace_path(file_part or ".")) + separator + rest
    python = workspace_python()
    argv = [python, "-m", "pytest", "-p", PLUGIN_NAME, "-p", "no:cacheprovider"]
    argv += ["-q", "--color=no", f"--rootdir={root}"]
    if not any((root / name).is_file() for name in CONFIG_FILES):
        # Without its own config pytest would climb to a parent directory's.
        (scratch / "pytest.ini").write_text("[pytest]\n")
        argv += ["-c", str(scratch / "pytest.ini")]
    if args.keyword:
        argv += ["-k", args.keyword]
    if args.max_failures:
        argv.append(f"--maxfail={args.max_failures}")
    argv += ["--", target]
    return argv


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop pytest and everything it started: SIGTERM, a short grace, then SIGKILL."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def follow_report(
    proc: subprocess.Popen[bytes], report: TextIO, tally: Tally, ctx: ToolContext
) -> None:
    """Tail the plugin's file until pytest exits; stop it on cancel or deadline."""
    buffered = ""
    while True:
        exited = proc.poll() is not None
        buffered += report.read()
        *lines, buffered = buffered.split("\n")
        for line in lines:
            if line.strip():
                handle_record(json.loads(line), tally, ctx)
        if exited:
            return
        if stop_requested(ctx):
            stop_process_group(proc)
            raise ToolCancelled()
        time.sleep(POLL_S)


def output_tail(log: BinaryIO, limit: int = 3000) -> str:
    """The end of pytest's output, read through the file this process opened (the
    tests own the scratch directory and could put another file at its path)."""
    log.seek(max(0, log.seek(0, os.SEEK_END) - 4 * limit))
    text = server_paths_hidden(log.read().decode("utf-8", errors="replace"))
    return text[-limit:].strip()


def interpreter_homes() -> list[Path]:
    """The virtualenv pytest's interpreter lives in and the installation it links to,
    which the sandbox mounts back should they lie in a covered directory (a virtualenv
    under /tmp, an installation in root's home); so is ``PLUGIN_DIR``."""
    python = Path(workspace_python())
    return list(dict.fromkeys([python.parent.parent, python.resolve().parent.parent]))


def run_ended(returncode: int, tally: Tally, isolation: str, log: BinaryIO) -> None:
    """Raise when pytest did not finish its run: the sandbox was not built, pytest
    died midway, or it could not start (exit status 3 or 4)."""
    if isolation == "namespaces" and returncode == SETUP_FAILED and tally.exitstatus is None:
        raise SandboxUnavailable(f"the tests did not run: {output_tail(log)}")
    if tally.exitstatus is None:
        raise RuntimeError(
            f"pytest ended before finishing the run (exit code {returncode}): {output_tail(log)}"
        )
    if tally.exitstatus in (3, 4):
        raise RuntimeError(f"pytest could not run (exit code {returncode}): {output_tail(log)}")


def run_tests(args: Any, ctx: ToolContext) -> dict[str, Any]:
    params = tool_input(RunTestsInput, args)
    root = workspace_root()
    started = time.monotonic()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="agentsite-run-tests-") as scratch_dir:
        scratch = Path(scratch_dir)
        report_path, log_path = scratch / "report.jsonl", scratch / "output.txt"
        report_path.touch()
        env = subprocess_env(report_path, scratch)
        argv, isolation = sandboxed(
            pytest_argv(params, root, scratch),
            cwd=root,
            scratch=scratch,
            workspace=root,
            keep=[*interpreter_homes(), PLUGIN_DIR],
        )
        if isolation == "none":
            # In the sandbox, the namespace's end takes the run with it instead.
            env["AGENTSITE_PARENT_PID"] = str(os.getpid())
        # Both files are opened before the tests start and read only through these.
        with open(log_path, "w+b") as log, open(report_path, encoding="utf-8") as report:
            proc = subprocess.Popen(
                argv,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                follow_report(proc, report, tally, ctx)
            finally:
                stop_process_group(proc)
            run_ended(proc.returncode, tally, isolation, log)
    summary = summary_line(tally.counts, tally.failing_files)
    if tally.exitstatus == 5:
        summary = f"no tests collected in {params.path}"
    return {
        "summary": summary,
        "path": params.path,
        "passed": tally.counts["passed"],
        "failed": tally.counts["failed"],
        "errors": tally.counts["errors"],
        "skipped": tally.counts["skipped"],
        "xfailed": tally.counts["xfailed"],
        "xpassed": tally.counts["xpassed"],
        "duration_s": round(time.monotonic() - started, 2),
        "exit_code": tally.exitstatus,
        "failures": [
            {key: server_paths_hidden(value) for key, value in failure.items()}
            for failure in tally.failures
        ],
        "sandbox": isolation,
    }


def summarize(result: dict[str, Any]) -> str:
    return str(result.get("summary", ""))


run_tests_tool = tool(
    name="run_tests",
    description=(
        "Run the pytest suite of the workspace (or a directory, file or test of it) and "
        "report each test as it finishes. Returns at once with a job; the result arrives "
        "later as an event with a summary like '412 passed, 3 failed (tests/test_auth.py)'. "
        "The full result lists every failure with its message."
    ),
    input_model=RunTestsInput,
    kind="async",
    approval="always",
    default_timeout_s=600.0,
    max_timeout_s=3600.0,
    summarize=summarize,
)(run_tests)
