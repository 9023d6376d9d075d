"""What runs on each host of ``make hosts``, and how the suite starts it.

``pg1``: the PostgreSQL primary; ``pg2``: its synchronous streaming standby, copied
with ``pg_basebackup``. ``redis1``: the Redis primary and a sentinel; ``redis2``: a
replica and a sentinel; ``redis3``: a sentinel. ``web1``, ``web2``: daphne, each
from a working directory of its own. ``worker``: a tool worker, a turn worker and
the scheduler, under libfaketime 30 s ahead of every other host where it is
installed. ``proxy``: nginx with ``deploy/nginx/agentsite.conf``, only its
addresses and ports changed. The app's processes are started from the systemd
units of ``deploy/systemd/`` (their ``ExecStart`` and ``Environment``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

from tests.conftest import BASE_DIR, subprocess_env, wait_until
from tests.deploy.units import ROLES, Unit, unit_read
from tests.hosts.environment import (
    PG_PORT,
    PROXY_PORT,
    REDIS_HOSTS,
    REDIS_PORT,
    SENTINEL_MASTER,
    SENTINEL_PORT,
    WEB_PORT,
)
from tests.hosts.network import HOSTS, SUBNET, HostProcesses, host_cut, in_namespace
from tests.servers import OwnPostgres

NGINX_CONF = BASE_DIR / "deploy" / "nginx" / "agentsite.conf"
# Added by the suite's own nginx.conf around the production file: which web host
# answered ($upstream_addr; "first, second" when nginx passed over the first).
UPSTREAM_HEADER = "X-Agentsite-Upstream"
PROXY = f"http://{HOSTS['proxy']}:{PROXY_PORT}"
WEB_HOSTS = ("web1", "web2")
# Turns take a couple of seconds and stream their answer; a quiet stream says so every
# second, so a client notices a dead connection within a few.
APP_ENV = {
    "AGENTSITE_SSE_HEARTBEAT_S": "1",
    "AGENTSITE_OFFLINE_CALL_S": "0.3",
    "AGENTSITE_OFFLINE_OUTPUT_TOKEN_S": "0.05",
}
# The worker host's processes, by the unit each is started from.
WORKER_UNITS = dict(zip(("tools", "turns", "scheduler"), ROLES["worker"], strict=True))
(WEB_UNIT,) = ROLES["web"]
# The worker host's clock runs this far ahead of the others' (libfaketime, where installed).
WORKER_SKEW_S = 30
FAKETIME = next(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"), None)
FAKETIME_SITE = Path(__file__).resolve().with_name("faketime")


def web_base(host: str) -> str:
    return f"http://{HOSTS[host]}:{WEB_PORT}"


def host_at(address: str) -> str:
    """The host whose ``address`` (``ip:port``) it is."""
    ip = address.strip().rsplit(":", 1)[0]
    return next(name for name, at in HOSTS.items() if at == ip)


def served_by(response_headers: Any) -> str:
    """The web host that answered, from the proxy's ``UPSTREAM_HEADER``."""
    return host_at(str(response_headers[UPSTREAM_HEADER]).split(",")[-1])


# The hosts' files (data directories, working directories, the proxy's configuration):
# one directory, emptied when a run starts (what a crashed run left) and when it ends.
SCRATCH = Path(tempfile.gettempdir()) / "agentsite-hosts"


def scratch_clear() -> None:
    shutil.rmtree(SCRATCH, ignore_errors=True)


def scratch(name: str) -> Path:
    """A new directory for ``name``, which the postgres user may reach (it runs pg)."""
    SCRATCH.mkdir(mode=0o755, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=SCRATCH))


class RedisTrio:
    """The primary on redis1, its replica on redis2, a sentinel on each of the three."""

    DOWN_AFTER_MS = 1000
    FAILOVER_TIMEOUT_MS = 3000

    def __init__(self, hosts: HostProcesses) -> None:
        self.hosts = hosts
        self.root = scratch("redis")

    @staticmethod
    def client(host: str, port: int = REDIS_PORT) -> redis.Redis:
        password = os.environ["REDIS_PASSWORD"] if port == REDIS_PORT else None
        return redis.Redis(
            host=HOSTS[host], port=port, password=password, socket_timeout=1, decode_responses=True
        )

    def _data_node(self, host: str, name: str, *extra: str) -> None:
        data_dir = self.root / name
        data_dir.mkdir()
        argv = ["redis-server", "--port", str(REDIS_PORT), "--bind", HOSTS[host]]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(data_dir), *extra]
        password = os.environ["REDIS_PASSWORD"]
        argv += ["--requirepass", password, "--masterauth", password]
        self.hosts.start(host, f"redis-{name}", argv)

    def start(self) -> None:
        self._data_node("redis1", "primary")
        self._data_node("redis2", "replica", "--replicaof", HOSTS["redis1"], str(REDIS_PORT))
        for host in REDIS_HOSTS:
            conf = self.root / f"sentinel-{host}.conf"
            conf.write_text(
                f"port {SENTINEL_PORT}\nbind {HOSTS[host]}\ndir {self.root}\n"
                f"sentinel monitor {SENTINEL_MASTER} {HOSTS['redis1']} {REDIS_PORT} 2\n"
                f"sentinel down-after-milliseconds {SENTINEL_MASTER} {self.DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SENTINEL_MASTER} {self.FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {SENTINEL_MASTER} 1\n"
                f"sentinel auth-pass {SENTINEL_MASTER} {os.environ['REDIS_PASSWORD']}\n"
                # No password of their own (REDIS_SENTINEL_PASSWORD): let them answer others.
                "protected-mode no\n"
            )
            self.hosts.start(host, f"sentinel-{host}", ["redis-server", str(conf), "--sentinel"])
        wait_until(self.ready, timeout=30, interval=0.1)

    def ready(self) -> bool:
        """Each sentinel knows the primary, its replica and the other two; the replica
        has caught up."""
        try:
            if self.client("redis2").info("replication").get("master_link_status") != "up":
                return False
            for host in REDIS_HOSTS:
                master: dict[str, Any] = self.client(host, SENTINEL_PORT).sentinel_master(  # type: ignore[assignment]
                    SENTINEL_MASTER
                )
                if master["num-slaves"] < 1 or master["num-other-sentinels"] < 2:
                    return False
            return True
        except redis.RedisError:
            return False

    def primary(self) -> str | None:
        """The host the sentinel on redis3 names as primary."""
        try:
            address: tuple[str, int] | None = self.client(  # type: ignore[assignment]
                "redis3", SENTINEL_PORT
            ).sentinel_get_master_addr_by_name(SENTINEL_MASTER)
        except redis.RedisError:
            return None
        return host_at(address[0]) if address else None

    def kill_primary(self) -> None:
        """The primary's process is killed for good; redis1's sentinel lives on."""
        self.hosts.kill("redis-primary")


def nginx_site() -> str:
    """``deploy/nginx/agentsite.conf`` with this network's addresses and ports, nothing else."""
    text = NGINX_CONF.read_text()
    changes = {
        "listen 80;": f"listen {HOSTS['proxy']}:{PROXY_PORT};",
        "server 10.0.0.21:8000 ": f"server {HOSTS['web1']}:{WEB_PORT} ",
        "server 10.0.0.22:8000 ": f"server {HOSTS['web2']}:{WEB_PORT} ",
    }
    for old, new in changes.items():
        if text.count(old) != 1:
            raise RuntimeError(f"{NGINX_CONF} no longer has one {old!r}: change {__file__} too")
        text = text.replace(old, new)
    return text


def nginx_main(root: Path) -> str:
    """The process-wide part a distribution's nginx.conf would hold, in ``root``."""
    temp = " ".join(
        f"{kind}_temp_path {root}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi")
    )
    return (
        f"user root;\nworker_processes 1;\npid {root}/nginx.pid;\n"
        f"error_log {root}/error.log info;\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n  {temp} scgi_temp_path {root}/scgi;\n"
        f"  include {root}/agentsite.conf;\n"
        f"  access_log {root}/access.log agentsite;\n"
        f"  add_header {UPSTREAM_HEADER} $upstream_addr always;\n"
        "}\n"
    )


class PostgresPair:
    """The primary on pg1 and, on pg2, a hot standby that has every committed
    transaction (``synchronous_standby_names``): promoted, it loses nothing."""

    STANDBY_NAME = "pg2"

    def __init__(self) -> None:
        self.primary = self._cluster("pg1")
        self.standby = self._cluster("pg2")

    @staticmethod
    def _cluster(host: str) -> OwnPostgres:
        return OwnPostgres(
            scratch(host), host=HOSTS[host], port=PG_PORT, run_in=tuple(in_namespace(host, []))
        )

    def start(self) -> None:
        self.primary.create()
        self.primary.trust(SUBNET)
        # A commit returns once the standby has it too (SETTINGS turn that off).
        self.primary.start(
            "synchronous_commit=on", f"synchronous_standby_names={self.STANDBY_NAME}"
        )
        self.standby.standby_of(self.primary, self.STANDBY_NAME)
        self.standby.start()
        wait_until(self.replicating, timeout=30, interval=0.2)

    @staticmethod
    def ask(host: str, query: str) -> list[tuple[Any, ...]] | None:
        """``query``'s rows on ``host``'s server, or None if it does not answer."""
        try:
            with psycopg.connect(
                host=HOSTS[host],
                port=PG_PORT,
                user="postgres",
                dbname="postgres",
                connect_timeout=2,
            ) as conn:
                return list(conn.execute(query).fetchall())  # type: ignore[arg-type]
        except psycopg.Error:
            return None

    def replicating(self) -> bool:
        """pg2 streams from pg1, as its synchronous standby."""
        rows = self.ask(
            "pg1", "SELECT application_name, state, sync_state FROM pg_stat_replication"
        )
        return rows == [(self.STANDBY_NAME, "streaming", "sync")]

    def writable(self, host: str) -> bool:
        return self.ask(host, "SELECT NOT pg_is_in_recovery()") == [(True,)]

    def lose_primary(self) -> None:
        """pg1 gone for good, without a word: its link down (nothing it had open is
        reset), then its server stopped as in a crash, so it never comes back."""
        host_cut("pg1")
        self.primary.stop("immediate")

    def promote_standby(self) -> None:
        self.standby.promote()

    def remove(self) -> None:
        for cluster in (self.standby, self.primary):
            cluster.remove()


def unit_argv(unit: Unit) -> list[str]:
    """The unit's ``ExecStart``, for this checkout and its virtualenv."""
    return unit.argv_at(BASE_DIR, sys.executable)


@dataclass
class Layout:
    hosts: HostProcesses
    redis: RedisTrio
    postgres: PostgresPair

    def app_env(self, unit: Unit) -> dict[str, str]:
        # What the unit's EnvironmentFile would hold, then its own Environment=; the app
        # is imported from the checkout whatever the working directory.
        env = {**subprocess_env(), **APP_ENV, "PYTHONPATH": str(BASE_DIR)}
        return {**env, **unit.environment}

    @property
    def worker_offset(self) -> timedelta:
        """How far the worker host's clock is ahead of the others'."""
        return timedelta(seconds=WORKER_SKEW_S if FAKETIME is not None else 0)

    def worker_clock(self) -> dict[str, str]:
        """The worker host's clock, WORKER_SKEW_S ahead of the others'."""
        if FAKETIME is None:
            return {}
        # The wall clock only, as a host's that is off: its monotonic clock stays true
        # (tests/hosts/faketime/sitecustomize.py says why, and what that takes).
        return {
            "LD_PRELOAD": str(FAKETIME),
            "FAKETIME": f"+{WORKER_SKEW_S}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "PYTHONPATH": f"{FAKETIME_SITE}:{BASE_DIR}",
        }

    def start_web(self, host: str) -> None:
        unit = unit_read(WEB_UNIT)
        argv = unit_argv(unit)
        # Every address of the host, which has one: WEB_PORT there.
        assert argv[argv.index("-p") + 1] == str(WEB_PORT), f"{WEB_UNIT} moved its port"
        self.hosts.start(host, f"daphne-{host}", argv, env=self.app_env(unit), cwd=scratch(host))

    def start_worker_unit(self, name: str, cwd: Path) -> None:
        unit = unit_read(WORKER_UNITS[name])
        env = {**self.app_env(unit), **self.worker_clock()}
        self.hosts.start("worker", name, unit_argv(unit), env=env, cwd=cwd)

    def start_worker_units(self) -> None:
        self.worker_cwd = scratch("worker")
        for name in WORKER_UNITS:
            self.start_worker_unit(name, self.worker_cwd)

    def start_proxy(self) -> None:
        root = scratch("proxy")
        (root / "agentsite.conf").write_text(nginx_site())
        (root / "nginx.conf").write_text(nginx_main(root))
        argv = ["nginx", "-p", str(root), "-c", str(root / "nginx.conf"), "-g", "daemon off;"]
        self.hosts.start("proxy", "nginx", argv)
        self.proxy_root = root

    def start(self) -> None:
        for host in WEB_HOSTS:
            self.start_web(host)
        self.start_worker_units()
        self.start_proxy()
        wait_until(self.healthy, timeout=90, interval=0.5)

    def healthy(self) -> bool:
        """Both web hosts, directly, and the proxy answer that everything is up."""
        bases = [web_base(host) for host in WEB_HOSTS] + [PROXY]
        try:
            return all(httpx.get(f"{b}/healthz", timeout=5).status_code == 200 for b in bases)
        except httpx.HTTPError:
            return False

    def units(self) -> list[str]:
        return [f"daphne-{host}" for host in WEB_HOSTS] + list(WORKER_UNITS) + ["nginx"]

    def alive(self) -> dict[str, int | None]:
        return {name: self.hosts.running[name].poll() for name in self.units()}

    def access_log(self) -> str:
        return (self.proxy_root / "access.log").read_text(errors="replace")
