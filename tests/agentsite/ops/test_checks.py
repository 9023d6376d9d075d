"""Configuration mistakes are system-check errors with ids, not tracebacks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import BASE_DIR


def run_check(**env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=BASE_DIR,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_default_configuration_passes() -> None:
    result = run_check()
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    ("env", "check_id"),
    [
        ({"AGENTSITE_MODEL": "gpt-nonsense"}, "agentsite.E002"),
        ({"AGENTSITE_MODEL": "claude-sonnet-4-5", "ANTHROPIC_API_KEY": ""}, "agentsite.E003"),
        ({"AGENTSITE_WORKSPACE": "/nonexistent/folder"}, "agentsite.E004"),
        ({"DEBUG": "maybe"}, "agentsite.E001"),
        ({"REDIS_URL": "http://wrong"}, "agentsite.E001"),
        ({"AGENTSITE_IDEMPOTENCY_TTL_S": "a day"}, "agentsite.E001"),
        ({"AGENTSITE_QUOTA_LIVE_JOBS": "-1"}, "agentsite.E006"),
        ({"AGENTSITE_QUOTA_MCP_IDLE_S": "0"}, "agentsite.E006"),
        ({"AGENTSITE_STREAM_SEND_BUFFER_MAX": "1024"}, "agentsite.E001"),
        ({"AGENTSITE_STREAM_STALL_S": "0"}, "agentsite.E001"),
        ({"AGENTSITE_RUN_TESTS_SANDBOX": "sometimes"}, "agentsite.E001"),
        ({"AGENTSITE_RUN_TESTS_WORKSPACE": "scratch"}, "agentsite.E001"),
        ({"AGENTSITE_RUN_TESTS_UID": "0"}, "agentsite.E001"),
        (
            {
                "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test",
                "AGENTSITE_DB_PREPARE_THRESHOLD": "sometimes",
            },
            "agentsite.E001",
        ),
        ({"REDIS_SENTINELS": "127.0.0.1:26379,sentinel-b"}, "agentsite.E001"),
        ({"REDIS_SENTINELS": "127.0.0.1:99999", "REDIS_URL": ""}, "agentsite.E001"),
        ({"REDIS_SENTINELS": "127.0.0.1:26379", "REDIS_URL": ""}, "agentsite.E007"),
        (
            {"REDIS_SENTINELS": "127.0.0.1:26379", "REDIS_SENTINEL_MASTER": "main"},
            "agentsite.E007",
        ),
        (
            {
                "REDIS_SENTINELS": "127.0.0.1:26379",
                "REDIS_SENTINEL_MASTER": "main",
                "REDIS_URL": "unix:///run/redis.sock",
            },
            "agentsite.E007",
        ),
        ({"REDIS_SENTINEL_MASTER": "main"}, "agentsite.E007"),
        ({"REDIS_PASSWORD": "secret"}, "agentsite.E007"),
        ({"REDIS_DB": "two"}, "agentsite.E001"),
        ({"DATABASE_URL": "postgres://u@db1:5432,db2:port/app"}, "agentsite.E001"),
    ],
)
def test_a_configuration_mistake_is_a_check_error(env: dict[str, str], check_id: str) -> None:
    result = run_check(**env)
    assert result.returncode != 0
    assert check_id in result.stderr
    assert "Traceback" not in result.stderr


def test_a_complete_sentinel_configuration_passes() -> None:
    result = run_check(
        REDIS_URL="",
        REDIS_SENTINELS="127.0.0.1:26379, 127.0.0.1:26380,[::1]:26381",
        REDIS_SENTINEL_MASTER="main",
        REDIS_SENTINEL_PASSWORD="sentinel-secret",
        REDIS_PASSWORD="data-secret",
        REDIS_DB="2",
    )
    assert result.returncode == 0, result.stderr


def test_several_database_hosts_without_target_session_attrs_is_a_warning() -> None:
    result = run_check(DATABASE_URL="postgres://u@db1:5432,db2:5432/app")
    assert "agentsite.W002" in result.stderr
    with_attrs = run_check(
        DATABASE_URL="postgres://u@db1:5432,db2:5432/app?target_session_attrs=read-write"
    )
    assert "agentsite.W002" not in with_attrs.stderr
