"""run_tests runs test files only, in a sandbox without the server's secrets or database.

Through the job API and a real tool worker. The probes live in a dot-directory
of the demo workspace (pytest and list_files skip those by default), so any
tool worker of the suite can run them.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from django.conf import settings
from django.db import connection

from tests.jobs.factories import start_job, started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)

TERMINAL = ("done", "failed", "cancelled", "timed_out")


@pytest.fixture
def probe_dir() -> Iterator[Path]:
    folder = Path(settings.AGENTSITE_WORKSPACE) / f".sandbox-probe-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def database_probe() -> str:
    """A test that passes only if it reaches the test database."""
    if connection.vendor == "sqlite":
        name = connection.settings_dict["NAME"]
        return f"def test_reads_the_database():\n    assert open({name!r}, 'rb').read(16)\n"
    host = connection.settings_dict.get("HOST") or "127.0.0.1"
    port = int(connection.settings_dict.get("PORT") or 5432)
    return (
        "import socket\n\n"
        "def test_reads_the_database():\n"
        f"    socket.create_connection(({host!r}, {port}), timeout=3).close()\n"
    )


def test_a_module_that_is_not_a_test_file_is_refused_unimported(
    api_client: Any, probe_dir: Path
) -> None:
    marker = probe_dir / "imported"
    (probe_dir / "helper.py").write_text(f"open({str(marker)!r}, 'w').close()\n")

    response = start_job(api_client, "run_tests", {"path": f"{probe_dir.name}/helper.py"})

    assert response.status_code == 422
    body = response.json()["error"]
    assert body["code"] == "invalid_arguments"
    assert "is not a test file: name a directory or a file named test_*.py" in str(body)
    assert not marker.exists()


def test_workspace_tests_cannot_read_the_secrets_database_or_environment(
    api_client: Any, rq_workers: Any, probe_dir: Path
) -> None:
    secret_key = Path(settings.LOCAL_DIR) / "secret_key"
    assert secret_key.exists()  # what the probe reaches for
    redis = urlparse(settings.REDIS_URL)
    (probe_dir / "test_probes.py").write_text(
        "import glob, os, socket, subprocess\n\n"
        "def test_reads_the_secret_key():\n"
        f"    assert open({str(secret_key)!r}).read()\n\n"
        "def test_finds_a_server_environment():\n"
        "    found = []\n"
        "    for path in glob.glob('/proc/*/environ'):\n"
        "        try:\n"
        "            found.append(b'DATABASE_URL=' in open(path, 'rb').read())\n"
        "        except OSError:\n"
        "            pass\n"
        "    assert any(found) or 'DATABASE_URL' in os.environ or 'SECRET_KEY' in os.environ\n\n"
        "def test_reaches_redis():\n"
        f"    socket.create_connection(({redis.hostname or '127.0.0.1'!r}, "
        f"{redis.port or 6379}), timeout=3).close()\n\n"
        "def test_undoes_the_cover():\n"
        f"    subprocess.run(['umount', {str(settings.LOCAL_DIR)!r}], check=True)\n\n"
        + database_probe()
    )

    job_id = started_job_id(api_client, "run_tests", {"path": probe_dir.name})
    job = wait_for_status(job_id, *TERMINAL, timeout=120)

    assert job.status == "done", job.error_message
    result = job.result
    assert result is not None
    assert result["sandbox"] == "namespaces"
    failures = {f["nodeid"].rsplit("::", 1)[1]: f["message"] for f in result["failures"]}
    assert result["passed"] == 0, failures
    assert set(failures) == {
        "test_reads_the_secret_key",
        "test_finds_a_server_environment",
        "test_reaches_redis",
        "test_undoes_the_cover",
        "test_reads_the_database",
    }
    assert "No such file or directory" in failures["test_reads_the_secret_key"]
    # Nothing in the result names the server's own directories.
    assert str(settings.BASE_DIR) not in str(result)
    assert settings.SECRET_KEY not in str(result)
