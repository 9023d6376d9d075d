"""Secrets, the data directory and the SQLite database are private from their first byte.

Each is created under a umask of 0 with chmod forbidden: a file that is only
restricted after it was created (and could be opened meanwhile) fails.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from agentsite import settings as agentsite_settings
from agentsite.core.private_files import sqlite_file_private
from tests.conftest import BASE_DIR


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask_and_no_chmod(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Files would be created 0666 by default, and may not be restricted afterwards."""

    def refuse_chmod(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path).is_file():
            raise AssertionError(f"{path} was created open and restricted afterwards")
        original(path, *args, **kwargs)

    original = os.chmod
    monkeypatch.setattr(os, "chmod", refuse_chmod)
    monkeypatch.setattr(Path, "chmod", lambda self, *a, **k: refuse_chmod(self, *a, **k))
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_the_secret_key_and_its_directory_are_private_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_umask_and_no_chmod: None
) -> None:
    data = tmp_path / "data"
    monkeypatch.setattr(agentsite_settings, "LOCAL_DIR", data)

    key = agentsite_settings.local_secret_key()

    assert len(key) > 40
    assert mode(data / "secret_key") == 0o600
    assert mode(data) == 0o700
    assert agentsite_settings.local_secret_key() == key  # kept, not made again
    assert [p.name for p in data.iterdir()] == ["secret_key"]  # no temporary file left


def test_a_data_directory_left_open_by_an_older_version_is_made_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    (data / "secret_key").write_text("an old key")
    (data / "secret_key").chmod(0o644)
    monkeypatch.setattr(agentsite_settings, "LOCAL_DIR", data)

    assert agentsite_settings.local_secret_key() == "an old key"
    assert mode(data) == 0o700
    assert mode(data / "secret_key") == 0o600


@pytest.mark.django_db
def test_the_admin_password_is_private_and_printed_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    open_umask_and_no_chmod: None,
) -> None:
    monkeypatch.delenv("AGENTSITE_ADMIN_PASSWORD", raising=False)
    monkeypatch.setenv("AGENTSITE_ADMIN_USER", "first-admin")
    with override_settings(LOCAL_DIR=tmp_path / "data"):
        call_command("ensure_login")
        created = capsys.readouterr().out
        call_command("ensure_login")
        again = capsys.readouterr().out

    saved = tmp_path / "data" / "login.txt"
    username, password = saved.read_text().split("\n")[:2]
    assert mode(saved) == 0o600 and mode(tmp_path / "data") == 0o700
    assert username == "first-admin" and password in created
    assert password not in again
    assert str(saved) in again  # says where it is instead


def test_a_new_sqlite_database_is_created_private(
    tmp_path: Path, open_umask_and_no_chmod: None
) -> None:
    database = tmp_path / "db.sqlite3"

    sqlite_file_private(database)

    assert mode(database) == 0o600


def test_migrate_leaves_the_database_and_its_wal_unreadable_to_others(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=BASE_DIR,
        env=env,
        preexec_fn=lambda: os.umask(0o022),  # the usual umask: new files readable by all
        check=True,
        timeout=300,
    )

    files = [database, *tmp_path.glob("db.sqlite3-*")]
    assert {p.name: mode(p) & 0o077 for p in files} == {p.name: 0 for p in files}


def test_an_existing_database_readable_by_others_is_restricted(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    database.write_bytes(b"")
    database.chmod(0o644)

    sqlite_file_private(database)

    assert mode(database) == 0o600
