"""read_file and list_files: read-only, inside the workspace only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings
from pydantic import ValidationError

from jobs.tools.context import LocalToolContext
from jobs.tools.files import list_files_tool as LIST_FILES
from jobs.tools.files import read_file_tool as READ_FILE


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "workspace"
    (root / "src" / "__pycache__").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\nprint('bye')\n")
    (root / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\x00\x01")
    (root / ".git" / "config").write_text("[core]\n")
    (root / "README.md").write_text("# demo\n")
    (root / "logo.png").write_bytes(b"\x89PNG\x00\x00\x00")
    (tmp_path / "secret.txt").write_text("password\n")
    (root / "secret_link.txt").symlink_to(tmp_path / "secret.txt")
    (root / "outside").symlink_to(tmp_path)
    with override_settings(AGENTSITE_WORKSPACE=root):
        yield root


def test_read_file_returns_the_text_and_a_summary(workspace: Path) -> None:
    result = READ_FILE.run({"path": "src/app.py"}, LocalToolContext())

    assert result["text"] == "print('hi')\nprint('bye')\n"
    assert result["summary"] == "src/app.py: 2 lines, 25 bytes"
    assert result["truncated"] is False


def test_read_file_cuts_off_at_max_bytes(workspace: Path) -> None:
    result = READ_FILE.run({"path": "src/app.py", "max_bytes": 5}, LocalToolContext())

    assert result["text"] == "print"
    assert result["truncated"] is True
    assert result["summary"] == "src/app.py: 1 line, first 5 of 25 bytes"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../secret.txt", "outside the workspace"),
        ("secret_link.txt", "outside the workspace"),
        ("outside/secret.txt", "outside the workspace"),
        ("/etc/passwd", "outside the workspace"),
        ("src", "not a file"),
        ("missing.txt", "does not exist"),
    ],
)
def test_read_file_refuses_paths_it_may_not_read(workspace: Path, path: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        READ_FILE.validate({"path": path})


def test_read_file_refuses_binary_files(workspace: Path) -> None:
    with pytest.raises(ValueError, match="binary file"):
        READ_FILE.run({"path": "logo.png"}, LocalToolContext())


def test_list_files_skips_hidden_files_and_links_out_of_the_workspace(workspace: Path) -> None:
    result = LIST_FILES.run({}, LocalToolContext())

    assert [f["path"] for f in result["files"]] == ["README.md", "logo.png", "src/app.py"]
    assert result["summary"] == "3 files matching '**/*' in ."


def test_list_files_takes_a_directory_a_pattern_and_a_cap(workspace: Path) -> None:
    in_src = LIST_FILES.run({"path": "src", "pattern": "*.py"}, LocalToolContext())
    capped = LIST_FILES.run({"max_results": 2, "include_hidden": True}, LocalToolContext())

    assert in_src["files"] == [{"path": "src/app.py", "size": 25}]
    assert len(capped["files"]) == 2
    assert capped["truncated"] is True


@pytest.mark.parametrize(
    "args",
    [{"path": ".."}, {"path": "outside"}, {"pattern": "../*"}, {"pattern": "/etc/*"}],
)
def test_list_files_refuses_to_leave_the_workspace(workspace: Path, args: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        LIST_FILES.validate(args)


def test_the_demo_workspace_is_listed_by_default() -> None:
    result = LIST_FILES.run({"pattern": "tests/*.py"}, LocalToolContext())

    assert "tests/test_pricing.py" in [f["path"] for f in result["files"]]


@pytest.fixture
def large_workspace(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "large"
    for top in range(30):
        folder = root / f"pkg{top}" / "deep"
        folder.mkdir(parents=True)
        for name in range(20):
            (folder / f"file{name}.py").write_text("x = 1\n")
    with override_settings(AGENTSITE_WORKSPACE=root):
        yield root


def test_list_files_refuses_a_pattern_of_many_recursive_segments(large_workspace: Path) -> None:
    with pytest.raises(ValidationError, match="the pattern has 6 '\\*\\*' segments; at most 2"):
        LIST_FILES.validate({"pattern": "**/**/**/**/**/**/*.py"})


def test_list_files_with_two_recursive_segments_lists_each_file_once(
    large_workspace: Path,
) -> None:
    result = LIST_FILES.run({"pattern": "**/deep/**/*.py", "max_results": 2000}, LocalToolContext())

    paths = [f["path"] for f in result["files"]]
    assert len(paths) == len(set(paths)) == 600
    assert paths == sorted(paths, key=lambda p: Path(p).parts)


def test_list_files_stops_at_its_deadline(large_workspace: Path) -> None:
    ctx = LocalToolContext()
    ctx.cancel()

    with pytest.raises(TimeoutError, match="list_files stopped at its deadline after visiting"):
        LIST_FILES.run({"pattern": "**/*.nothing"}, ctx)


def test_list_files_stops_after_visiting_its_cap_of_entries(
    large_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("jobs.tools.files.MAX_ENTRIES_VISITED", 100)

    with pytest.raises(ValueError, match="stopped after visiting 100 entries"):
        LIST_FILES.run({"pattern": "**/*.nothing"}, LocalToolContext())
