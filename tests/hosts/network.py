"""The hosts of ``make hosts``: Linux network namespaces on one bridge, with no way out.

Every host is a namespace ``ash-<name>`` with one veth whose other end, also
named ``ash-<name>``, sits on the bridge ``ash-br0`` in the runner's namespace.
The bridge holds the runner's own address (the test process is a client host
like any other); no namespace has a default route, so nothing leaves
``SUBNET``. Cutting a host off is setting its bridge end down: its packets are
dropped, as when a machine's cable is pulled, and no connection is refused.

Whatever a run leaves behind (a crash, a kill) is removed by the next
``network_build``: every namespace and link named ``ash-*``, and every process
still in such a namespace.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ash-"
BRIDGE = "ash-br0"
SUBNET = "10.231.0.0/24"
RUNNER = "10.231.0.1"
# name → address; the namespace and the bridge end are both ash-<name>.
HOSTS = {
    "pg1": "10.231.0.10",
    "pg2": "10.231.0.11",
    "web1": "10.231.0.21",
    "web2": "10.231.0.22",
    "proxy": "10.231.0.30",
    "worker": "10.231.0.40",
    "redis1": "10.231.0.41",
    "redis2": "10.231.0.42",
    "redis3": "10.231.0.43",
}


def unavailable() -> str | None:
    """Why namespaces cannot be built here, or None."""
    if os.geteuid() != 0:
        return "the hosts suite builds network namespaces and needs root"
    if shutil.which("ip") is None:
        return "the hosts suite needs iproute2's `ip` (Debian: iproute2)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.strip()}"
    return None


def ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def namespace(host: str) -> str:
    return f"{PREFIX}{host}"


def in_namespace(host: str, argv: list[str]) -> list[str]:
    """``argv`` run inside ``host``'s namespace."""
    return ["ip", "netns", "exec", namespace(host), *argv]


def namespace_pids(name: str) -> list[int]:
    try:
        return [int(pid) for pid in ip("netns", "pids", name).split()]
    except RuntimeError:
        return []


def leftovers_remove() -> None:
    """Every ``ash-*`` namespace with its processes, and every ``ash-*`` link."""
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name.startswith(PREFIX):
            continue
        for pid in namespace_pids(name):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        ip("netns", "delete", name)
    for line in ip("-o", "link", "show").splitlines():
        link = line.split(":")[1].strip().split("@")[0]
        if link.startswith(PREFIX):
            try:
                ip("link", "delete", link)
            except RuntimeError:
                pass  # a veth's end goes with its peer


def network_build() -> None:
    leftovers_remove()
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{RUNNER}/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    for host, address in HOSTS.items():
        ns = namespace(host)
        ip("netns", "add", ns)
        ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", ns, "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("link", "set", ns, "master", BRIDGE)
        ip("link", "set", ns, "up")
        ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")


def default_routes() -> list[str]:
    """The namespaces that have a default route (none should)."""
    return [
        namespace(host)
        for host in HOSTS
        if "default" in ip("-n", namespace(host), "route", "show", "default")
    ]


def host_cut(host: str) -> None:
    """Pull ``host``'s cable: everything it sends or is sent is dropped."""
    ip("link", "set", namespace(host), "down")


def host_mend(host: str) -> None:
    ip("link", "set", namespace(host), "up")


@dataclass
class HostProcesses:
    """Programs started inside the hosts' namespaces, each logging to ``logs/<name>.log``."""

    logs: Path
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self,
        host: str,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                in_namespace(host, argv),
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.running[name] = proc
        return proc

    def kill(self, name: str) -> None:
        """SIGKILL: gone for good, as in a crash."""
        proc = self.running.pop(name)
        proc.kill()
        proc.wait()

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self, names: list[str], timeout: float = 10) -> None:
        """SIGTERM to each (their shutdowns overlap), SIGKILL to what is left."""
        procs = [self.running.pop(name) for name in names if name in self.running]
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # work horses and the like
            except (ProcessLookupError, PermissionError):
                pass

    def stop_all(self) -> None:
        self.stop(list(self.running))
