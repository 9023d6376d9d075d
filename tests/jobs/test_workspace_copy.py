"""run_tests copies a live workspace: what vanishes while it is copied is left out, the
rest is copied whole, and no run fails for it."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.tools.sandbox import copy_workspace


@pytest.fixture
def churning_workspace(tmp_path: Path) -> Iterator[Path]:
    """A workspace with two files that stay, and directories that come and go
    (another run's artifacts, say) as fast as a thread can make and remove them."""
    workspace = tmp_path / "workspace"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "tests" / "test_stays.py").write_text("def test_stays():\n    pass\n")
    (workspace / "README").write_text("stays\n")
    stop = threading.Event()

    def churn() -> None:
        turn = 0
        while not stop.is_set():
            folder = workspace / "artifacts" / f"run-{turn % 8}"
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
    for attempt in range(150):
        destination = tmp_path / f"copy-{attempt}"
        copy_workspace(churning_workspace, destination, hidden=[])
        assert (destination / "tests" / "test_stays.py").read_text().startswith("def test")
        assert (destination / "README").read_text() == "stays\n"
