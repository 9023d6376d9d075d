"""run_tests: pytest in a subprocess, one partial result per test, stoppable as a whole."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from pydantic import ValidationError

from jobs.registry import ToolCancelled
from jobs.tools.context import LocalToolContext
from jobs.tools.run_tests import run_tests_tool as RUN_TESTS
from tests.conftest import wait_until


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie waiting for its parent counts as gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def host_pids(workspace: Path) -> tuple[int, int]:
    """The pids of the slow test's pytest and its child as this machine numbers them (in
    the sandbox the tests see pids of their own namespace): the processes working there."""
    pytest_pid = child_pid = 0
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or (proc / "cwd").resolve() != workspace.resolve():
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0] == b"sleep":
            child_pid = int(proc.name)
        elif argv[1:3] == [b"-m", b"pytest"]:
            pytest_pid = int(proc.name)
    assert pytest_pid and child_pid
    return pytest_pid, child_pid


@pytest.fixture
def slow_workspace(tmp_path: Path) -> Iterator[Path]:
    """A workspace whose slow test starts a child process, notes both pids, and sleeps."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_slow.py").write_text(
        "import os, subprocess, time\n"
        "\n"
        "def test_quick():\n"
        "    pass\n"
        "\n"
        "def test_slow():\n"
        "    child = subprocess.Popen(['sleep', '60'])\n"
        "    with open('pids.tmp', 'w') as f:\n"
        "        f.write(f'{os.getpid()} {child.pid}')\n"
        "    os.rename('pids.tmp', 'pids')\n"
        "    time.sleep(60)\n"
    )
    # The slow test notes its pids in the workspace itself, which it may write here.
    writable_by_the_tests(tmp_path)
    with override_settings(AGENTSITE_WORKSPACE=tmp_path, AGENTSITE_RUN_TESTS_WORKSPACE="writable"):
        yield tmp_path


def writable_by_the_tests(workspace: Path) -> None:
    """Give ``workspace`` to the user the sandboxed tests run as (when the server is root)."""
    if os.geteuid() == 0:
        for path in [workspace, *workspace.rglob("*")]:
            os.chown(path, settings.AGENTSITE_RUN_TESTS_UID, settings.AGENTSITE_RUN_TESTS_GID)


def run_in_thread(args: dict[str, Any], ctx: LocalToolContext) -> dict[str, Any]:
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = RUN_TESTS.run(args, ctx)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    outcome["thread"] = thread
    return outcome


def test_the_demo_suite_reports_two_failures_in_one_file() -> None:
    ctx = LocalToolContext()
    result = RUN_TESTS.run({}, ctx)

    assert result["summary"] == "31 passed, 2 failed (tests/test_pricing.py)"
    assert (result["passed"], result["failed"], result["errors"]) == (31, 2, 0)
    assert [f["nodeid"] for f in result["failures"]] == [
        "tests/test_pricing.py::test_discount_above_100_percent_is_capped",
        "tests/test_pricing.py::test_bulk_discount_starts_at_the_threshold",
    ]
    assert "assert -200 == 0" in result["failures"][0]["message"]
    assert RUN_TESTS.summary(result) == result["summary"]


def test_each_finished_test_is_one_partial_result_with_progress() -> None:
    ctx = LocalToolContext()
    RUN_TESTS.run({"path": "tests/test_warehouse.py"}, ctx)

    assert len(ctx.partials) == 5
    assert {p["outcome"] for p in ctx.partials} == {"passed"}
    assert all(p["nodeid"].startswith("tests/test_warehouse.py::") for p in ctx.partials)
    assert all(p["duration"] > 0 for p in ctx.partials)
    fractions = [f for f, _ in ctx.progress_updates if f is not None]
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0
    assert ctx.progress_updates[-1][1].startswith("5/5 passed tests/test_warehouse.py::")


def test_a_node_id_and_a_keyword_narrow_the_run() -> None:
    one = RUN_TESTS.run({"path": "tests/test_pricing.py::test_tax_is_added"}, LocalToolContext())
    keyword = RUN_TESTS.run({"keyword": "format_cents"}, LocalToolContext())

    assert one["summary"] == "1 passed"
    assert keyword["summary"] == "4 passed"


def test_max_failures_stops_the_run_early() -> None:
    result = RUN_TESTS.run({"path": "tests/test_pricing.py", "max_failures": 1}, LocalToolContext())

    assert result["failed"] == 1
    assert result["passed"] < 11


@pytest.mark.parametrize(
    "path",
    ["..", "../pyproject.toml", "tests/../../manage.py", "/etc", "/etc/passwd::test_x"],
)
def test_paths_outside_the_workspace_are_refused(path: str) -> None:
    with pytest.raises(ValidationError, match="outside the workspace"):
        RUN_TESTS.validate({"path": path})


def test_a_symlink_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "tests").mkdir(parents=True)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "escape").symlink_to(outside)

    with override_settings(AGENTSITE_WORKSPACE=workspace):
        with pytest.raises(ValidationError, match="outside the workspace"):
            RUN_TESTS.validate({"path": "escape/tests"})


def test_a_keyword_cannot_smuggle_in_an_option() -> None:
    with pytest.raises(ValidationError, match="may not start with '-'"):
        RUN_TESTS.validate({"keyword": "--pdb"})


def test_a_run_that_dies_midway_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "test_exit.py").write_text("import os\n\ndef test_exit():\n    os._exit(3)\n")

    with override_settings(AGENTSITE_WORKSPACE=tmp_path):
        with pytest.raises(RuntimeError, match="pytest ended before finishing the run"):
            RUN_TESTS.run({}, LocalToolContext())


def test_a_missing_path_is_refused() -> None:
    with pytest.raises(ValidationError, match="does not exist"):
        RUN_TESTS.validate({"path": "tests/test_nothing_here.py"})


def test_a_collection_error_is_reported_as_an_error(tmp_path: Path) -> None:
    (tmp_path / "test_broken.py").write_text("import no_such_module\n")
    (tmp_path / "test_fine.py").write_text("def test_ok():\n    pass\n")

    with override_settings(AGENTSITE_WORKSPACE=tmp_path):
        result = RUN_TESTS.run({}, LocalToolContext())

    assert result["summary"] == "1 error (test_broken.py)"
    assert result["failures"][0]["nodeid"] == "test_broken.py"
    assert "no_such_module" in result["failures"][0]["message"]


def test_an_empty_workspace_collects_no_tests(tmp_path: Path) -> None:
    with override_settings(AGENTSITE_WORKSPACE=tmp_path):
        result = RUN_TESTS.run({}, LocalToolContext())

    assert result["summary"] == "no tests collected in ."
    assert result["exit_code"] == 5


def test_the_tests_do_not_see_the_servers_environment(tmp_path: Path) -> None:
    (tmp_path / "test_env.py").write_text(
        "import os\n\ndef test_env():\n    assert 'DJANGO_SETTINGS_MODULE' not in os.environ\n"
    )
    with override_settings(AGENTSITE_WORKSPACE=tmp_path):
        result = RUN_TESTS.run({}, LocalToolContext())

    assert result["summary"] == "1 passed"


PLUGINS_SEEN = (
    "def test_plugins(pytestconfig):\n"
    "    names = {name for name, _ in pytestconfig.pluginmanager.list_name_plugin()}\n"
    "    assert names.isdisjoint({'django', 'xdist.plugin', 'asyncio', 'timeout'}), names\n"
)


def test_the_tests_get_none_of_the_servers_pytest_plugins(tmp_path: Path) -> None:
    (tmp_path / "test_plugins.py").write_text(PLUGINS_SEEN)
    with override_settings(AGENTSITE_WORKSPACE=tmp_path):
        result = RUN_TESTS.run({}, LocalToolContext())

    assert result["summary"] == "1 passed", result


def test_a_workspace_interpreter_of_its_own_keeps_its_plugins(tmp_path: Path) -> None:
    """Another interpreter's plugins are the workspace's own: pytest loads them. (This
    one is the server's under another name, so its plugins are the ones seen.)"""
    (tmp_path / "test_plugins.py").write_text(PLUGINS_SEEN)
    python = os.path.join(os.path.dirname(sys.executable), ".", os.path.basename(sys.executable))
    with override_settings(AGENTSITE_WORKSPACE=tmp_path, AGENTSITE_WORKSPACE_PYTHON=python):
        result = RUN_TESTS.run({}, LocalToolContext())

    assert result["summary"] == "1 failed (test_plugins.py)", result


def test_cancelling_kills_the_whole_process_group(slow_workspace: Path) -> None:
    pids_file = slow_workspace / "pids"
    ctx = LocalToolContext()
    outcome = run_in_thread({}, ctx)
    wait_until(pids_file.exists, timeout=30)
    pytest_pid, child_pid = host_pids(slow_workspace)
    assert process_alive(pytest_pid) and process_alive(child_pid)

    ctx.cancel()
    outcome["thread"].join(timeout=15)

    assert isinstance(outcome.get("error"), ToolCancelled)
    assert [p["nodeid"] for p in ctx.partials] == ["tests/test_slow.py::test_quick"]
    wait_until(lambda: not process_alive(pytest_pid) and not process_alive(child_pid), timeout=10)


def test_the_deadline_stops_the_run(slow_workspace: Path) -> None:
    pids_file = slow_workspace / "pids"
    ctx = LocalToolContext(timeout_s=3600)
    pids: list[tuple[int, int]] = []

    def deadline_passes_once_the_slow_test_runs() -> None:
        # A fixed deadline could pass before a loaded machine's pytest got that far.
        wait_until(pids_file.exists, timeout=60)
        pids.append(host_pids(slow_workspace))
        ctx.deadline = timezone.now()

    threading.Thread(target=deadline_passes_once_the_slow_test_runs, daemon=True).start()
    with pytest.raises(ToolCancelled):
        RUN_TESTS.run({}, ctx)

    pytest_pid, child_pid = pids[0]
    wait_until(lambda: not process_alive(pytest_pid) and not process_alive(child_pid), timeout=10)


def test_a_killed_runner_takes_the_test_run_with_it(slow_workspace: Path) -> None:
    """The worker running the tool dies (SIGKILL): the orphaned pytest ends itself."""
    import signal
    import subprocess
    import sys

    pids_file = slow_workspace / "pids"
    script = (
        "import django\n"
        "django.setup()\n"
        "from jobs.tools.context import LocalToolContext\n"
        "from jobs.tools.run_tests import run_tests\n"
        "run_tests({}, LocalToolContext())\n"
    )
    runner = subprocess.Popen(
        [sys.executable, "-c", script],
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "agentsite.settings",
            "AGENTSITE_WORKSPACE": str(slow_workspace),
            "AGENTSITE_RUN_TESTS_WORKSPACE": "writable",
        },
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        wait_until(pids_file.exists, timeout=30)
        pytest_pid, child_pid = host_pids(slow_workspace)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        wait_until(
            lambda: not process_alive(pytest_pid) and not process_alive(child_pid), timeout=10
        )
    finally:
        runner.kill()
        runner.wait()


def test_an_error_of_the_run_names_no_server_path(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    with override_settings(AGENTSITE_WORKSPACE=tmp_path):
        with pytest.raises(RuntimeError) as raised:
            RUN_TESTS.run({"path": "test_a.py::test_missing"}, LocalToolContext())

    message = str(raised.value)
    assert "pytest could not run" in message
    assert "test_a.py::test_missing" in message
    assert str(tmp_path) not in message


@pytest.fixture
def no_sandbox_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine without unshare/setpriv."""
    import shutil

    from jobs.tools import sandbox

    monkeypatch.setattr(shutil, "which", lambda name: None)
    sandbox.namespaces_work.cache_clear()
    yield
    sandbox.namespaces_work.cache_clear()


def test_without_a_sandbox_auto_runs_with_the_scrubbed_environment_only(
    tmp_path: Path, no_sandbox_here: None
) -> None:
    (tmp_path / "test_env.py").write_text(
        "import os\n\ndef test_env():\n    assert 'SECRET_KEY' not in os.environ\n"
        "    assert os.environ['HOME'] != os.path.expanduser('~root')\n"
    )
    with override_settings(AGENTSITE_WORKSPACE=tmp_path, AGENTSITE_RUN_TESTS_SANDBOX="auto"):
        result = RUN_TESTS.run({}, LocalToolContext())

    assert (result["summary"], result["sandbox"]) == ("1 passed", "none")


def test_without_a_sandbox_required_fails_the_run_with_a_clear_error(
    tmp_path: Path, no_sandbox_here: None
) -> None:
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    with override_settings(AGENTSITE_WORKSPACE=tmp_path, AGENTSITE_RUN_TESTS_SANDBOX="required"):
        with pytest.raises(
            RuntimeError, match="run_tests runs tests only in its sandbox, and none"
        ):
            RUN_TESTS.run({}, LocalToolContext())


def test_the_sandbox_is_used_where_it_can_be_made(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    with override_settings(AGENTSITE_WORKSPACE=tmp_path):
        result = RUN_TESTS.run({}, LocalToolContext())

    assert result["sandbox"] == "namespaces"
