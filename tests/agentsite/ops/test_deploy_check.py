"""``manage.py check --deploy`` is clean with the settings a production deployment sets."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

from tests.conftest import BASE_DIR

PRODUCTION = {
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "agents.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://agents.example.com",
    "AGENTSITE_HTTPS": "true",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
}


def deploy_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    scrubbed = {k: v for k, v in os.environ.items() if k != "DEBUG" and not k.startswith("SECURE_")}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env={**scrubbed, "DJANGO_SETTINGS_MODULE": "agentsite.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_production_settings_pass_the_deploy_check() -> None:
    done = deploy_check(PRODUCTION)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_debug_is_off_unless_asked_for() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings;"
            " print(settings.DEBUG)",
        ],
        cwd=BASE_DIR,
        env={
            **{k: v for k, v in os.environ.items() if k != "DEBUG"},
            "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )

    assert done.stdout.strip() == "False"


def test_plain_http_settings_are_reported_by_the_deploy_check() -> None:
    done = deploy_check({**PRODUCTION, "AGENTSITE_HTTPS": "false"})

    assert done.returncode != 0
    assert "security.W008" in done.stdout + done.stderr
