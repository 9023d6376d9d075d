"""Servers of a test's own, which it may kill and start again: Redis and PostgreSQL.

Outage tests cannot use the machine's shared servers (other runs use them), so
they start these on free loopback ports with throw-away data directories.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

from agentsite.core.embedded_redis import free_port, redis_server_command, wait_for_redis


class OwnRedis:
    """A redis-server on a fixed port that can be killed and started again, empty."""

    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            redis_server_command(self.port, self.data_dir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        wait_for_redis(self.url)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def postgres_bin_dir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` are: on the PATH, or Debian's versioned directory."""
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
        reverse=True,
    )
    return next((path for path in versions if (path / "initdb").exists()), None)


class OwnPostgres:
    """A PostgreSQL cluster on a free loopback port, in a directory of its own, trust auth.

    PostgreSQL refuses to run as root; run as root, its programs run as the
    ``postgres`` user (``runuser``), which then owns the directory.
    """

    # Durability is not what is under test, and the box is small.
    SETTINGS = (
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
        "max_connections=200",
        "listen_addresses=127.0.0.1",
    )

    def __init__(self, root: Path) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL's initdb and pg_ctl were not found")
        self.bin_dir = bin_dir
        self.root = root
        self.data_dir = root / "data"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str) -> None:
        argv = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            output = done.stderr or done.stdout
            raise RuntimeError(f"{program} failed ({done.returncode}): {output}")

    def create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )

    def start(self) -> None:
        options = " ".join(
            [f"-p {self.port}", f"-k {self.root}", *(f"-c {s}" for s in self.SETTINGS)]
        )
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", log, "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` ends every session, ``immediate`` is a crash."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        if (self.data_dir / "postmaster.pid").exists():
            try:
                self.stop("immediate")
            except RuntimeError:
                pass  # already gone; its directory goes all the same
        shutil.rmtree(self.root, ignore_errors=True)


def client_venv(name: str, *requirements: str) -> Path:
    """The interpreter of a virtual environment of its own holding ``requirements``.

    For clients whose dependencies conflict with the app's (an older MCP SDK,
    Microsoft Agent Framework). Built once under ``.agentsite/<name>``, aside and
    renamed, so an interrupted install is never mistaken for a good one.
    """
    from tests.conftest import BASE_DIR

    venv = BASE_DIR / ".agentsite" / name
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python
    building = venv.with_name(f"{venv.name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(building)], check=True)
    subprocess.run(
        [str(building / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
        check=True,
        timeout=600,
    )
    (building / ".complete").touch()
    if (venv / ".complete").exists():
        # Another test process finished first and may be running from it: never remove it.
        shutil.rmtree(building, ignore_errors=True)
        return python
    shutil.rmtree(venv, ignore_errors=True)  # an interrupted build's leftover
    try:
        building.rename(venv)
    except OSError:
        # Another test run finished building the same environment first.
        shutil.rmtree(building, ignore_errors=True)
        if not (venv / ".complete").exists():
            raise
    return python
