"""run_tests copies a live workspace: what vanishes while it is copied is left out, the
rest is copied whole, and no run fails for it."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.tools.sandbox import copy_workspace


@pytest.fixture(params=[8, 1], ids=["names-come-and-go", "one-name-removed-and-made-again"])
def churning_workspace(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A workspace with two files that stay, and directories that come and go (another
    run's artifacts, say) as fast as a thread can make and remove them: eight names in
    turn, or one name that a copy often finds gone and, a moment later, back."""
    workspace = tmp_path / "workspace"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "tests" / "test_stays.py").write_text("def test_stays():\n    pass\n")
    (workspace / "README").write_text("stays\n")
    names: int = request.param
    stop = threading.Event()

    def churn() -> None:
        turn = 0
        while not stop.is_set():
            folder = workspace / "artifacts" / f"run-{turn % names}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "log").write_text("x")
            shutil.rmtree(folder, ignore_errors=True)
            turn += 1

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    yield workspace
    stop.set()
    thread.join()


def test_entries_removed_during_the_copy_are_left_out_and_the_rest_is_copied(
    churning_workspace: Path, tmp_path: Path
) -> None:
    for attempt in range(400):
        destination = tmp_path / f"copy-{attempt}"
        copy_workspace(churning_workspace, destination, hidden=[])
        assert (destination / "tests" / "test_stays.py").read_text().startswith("def test")
        assert (destination / "README").read_text() == "stays\n"
        for run in (destination / "artifacts").glob("run-*"):
            assert run.is_dir()


def test_a_failure_on_the_copy_side_still_fails(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "README").write_text("stays\n")
    destination = tmp_path / "copy"
    destination.mkdir()
    with pytest.raises(FileExistsError):
        copy_workspace(workspace, destination, hidden=[])


def test_hidden_and_special_entries_are_left_out(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "data").mkdir(parents=True)
    (workspace / "data" / "secret").write_text("no")
    (workspace / "src").mkdir()
    (workspace / "src" / "tool.sh").write_text("#!/bin/sh\n")
    (workspace / "src" / "tool.sh").chmod(0o755)
    (workspace / "link").symlink_to("src/tool.sh")
    os.mkfifo(workspace / "pipe")
    destination = tmp_path / "copy"
    copy_workspace(workspace, destination, hidden=[workspace / "data"])
    assert sorted(path.name for path in destination.iterdir()) == ["link", "src"]
    assert os.readlink(destination / "link") == "src/tool.sh"
    assert (destination / "src" / "tool.sh").stat().st_mode & 0o777 == 0o755
