"""A password set in AGENTSITE_ADMIN_PASSWORD is never printed: `make run` (``manage.py
serve``, which runs ``ensure_login``) says only that the login uses it."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.test import override_settings

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-staple"


@pytest.fixture(autouse=True)
def password_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSITE_ADMIN_USER", "operator")
    monkeypatch.setenv("AGENTSITE_ADMIN_PASSWORD", PASSWORD)


def test_the_first_start_creates_the_login_without_printing_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with override_settings(LOCAL_DIR=tmp_path / "data"):
        call_command("ensure_login")
    said = capsys.readouterr()

    assert PASSWORD not in said.out + said.err
    assert "operator" in said.out
    assert "AGENTSITE_ADMIN_PASSWORD" in said.out
    assert authenticate(username="operator", password=PASSWORD) is not None
    assert not (tmp_path / "data" / "login.txt").exists()


def test_a_later_start_does_not_print_it_either(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with override_settings(LOCAL_DIR=tmp_path / "data"):
        call_command("ensure_login")
        capsys.readouterr()
        call_command("ensure_login")
    said = capsys.readouterr()

    assert PASSWORD not in said.out + said.err
    assert "AGENTSITE_ADMIN_PASSWORD" in said.out
