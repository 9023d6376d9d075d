"""What the benchmarks share: the scratch environment they run in, the processes they
start and stop, and what they read of those processes in /proc (not a benchmark itself).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from agentsite.core.embedded_redis import free_port

BASE_DIR = Path(__file__).resolve().parent.parent
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


# --- the scratch environment ---------------------------------------------------------------


def scratch_environment(
    scratch: Path, *, name: str, extra_tools: str = ""
) -> list[subprocess.Popen[bytes]]:
    """Point this process (and the workers it starts) at a scratch database and Redis.

    ``REDIS_URL`` is used when set, else an embedded Redis is started (returned,
    for the caller to stop); ``BENCH_DATABASE_URL`` selects the database, else a
    scratch SQLite file.
    """
    owned: list[subprocess.Popen[bytes]] = []
    if not os.environ.get("REDIS_URL"):
        from agentsite.core.embedded_redis import PRIVATE_REDIS_HZ, start_embedded_redis

        # As ``make run`` starts its own.
        process, url = start_embedded_redis(scratch / "redis", hz=PRIVATE_REDIS_HZ)
        owned.append(process)
        os.environ["REDIS_URL"] = url
    os.environ["DATABASE_URL"] = os.environ.get(
        "BENCH_DATABASE_URL", f"sqlite:///{scratch / 'bench.sqlite3'}"
    )
    os.environ["AGENTSITE_REDIS_PREFIX"] = f"bench-{name}-{os.getpid()}"
    if extra_tools:
        os.environ["AGENTSITE_EXTRA_TOOLS"] = extra_tools
    os.environ["DJANGO_SETTINGS_MODULE"] = "agentsite.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # One bench user floods the server on purpose; the per-user quotas (tested in the
    # suite) would refuse it, and throughput is what a benchmark measures.
    for quota in ("LIVE_JOBS", "LIVE_TURNS", "MESSAGES_PER_MINUTE", "MCP_SESSIONS"):
        os.environ.setdefault(f"AGENTSITE_QUOTA_{quota}", "0")
    return owned


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def api_tokens(count: int, *, username_prefix: str) -> list[str]:
    """An API token for each of ``count`` users, made as they are needed."""
    from django.contrib.auth import get_user_model

    from accounts.models import ApiToken

    User = get_user_model()
    tokens = []
    for i in range(count):
        user, _ = User.objects.get_or_create(username=f"{username_prefix}-{i}")
        tokens.append(ApiToken.issue(user=user, name="bench")[1])
    return tokens


def api_tokens_file(count: int, path: Path, *, username_prefix: str) -> None:
    """``api_tokens`` written to ``path`` as a JSON list, for processes of their own."""
    path.write_text(json.dumps(api_tokens(count, username_prefix=username_prefix)))


# --- processes -------------------------------------------------------------------------------


def process_start(
    argv: list[str], *, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python *argv`` in the project, in a process group of its own, appending to ``log``."""
    out = open(log, "ab")  # open as long as the process runs
    return subprocess.Popen(
        [sys.executable, *argv],
        cwd=BASE_DIR,
        env=dict(os.environ) if env is None else env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def processes_stop(procs: list[subprocess.Popen[bytes]], *, grace_s: float = 10.0) -> None:
    """Ask every process to stop, then kill those still running ``grace_s`` later."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def daphne_start(
    scratch: Path, app: str = "agentsite.asgi:application"
) -> tuple[subprocess.Popen[bytes], int]:
    """One daphne serving ``app`` on a free loopback port, once it accepts connections."""
    port = free_port()
    argv = ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "-v", "0", app]
    proc = process_start(argv, log=scratch / "daphne.log")
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("daphne did not start; see its log") from None
            time.sleep(0.1)


def tool_workers_start(scratch: Path, count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` RQ workers on ``tools`` against the scratch environment, logging to it."""
    manage = str(BASE_DIR / "manage.py")
    return [
        process_start([manage, "rqworker", "tools", "-v", "0"], log=scratch / "workers.log")
        for _ in range(count)
    ]


def workers_wait(queue_name: str, count: int = 1, *, within_s: float = 30) -> None:
    """Return once ``count`` workers listen on the queue ``queue_name``."""
    import django_rq
    from rq import Worker

    queue = django_rq.get_queue(queue_name)
    deadline = time.monotonic() + within_s
    while len(Worker.all(queue=queue)) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"workers for {queue_name} did not start")
        time.sleep(0.1)


# --- what the processes hold, from /proc --------------------------------------------------


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state is [0], ppid [1])."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def parents() -> dict[int, int]:
    """Every live process's parent, from one pass over /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int(stat_fields(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                continue  # it ended meanwhile
    return found


def children_of(pid: int, table: dict[int, int]) -> list[int]:
    return [child for child, parent in table.items() if parent == pid]


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def cpu_ticks(pid: int) -> tuple[int, int]:
    """(the process's own utime + stime, the cutime + cstime of the children it reaped)."""
    fields = stat_fields(pid)
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (its own, not its children's)."""
    return cpu_ticks(pid)[0] / TICKS_PER_S


def live_children_ticks(pid: int, table: dict[int, int]) -> int:
    """CPU ticks of ``pid``'s live children and the ones they reaped (a tool worker's warm
    work horse lives across jobs, so its time is not yet in the worker's cutime)."""
    total = 0
    for child in children_of(pid, table):
        try:
            total += sum(cpu_ticks(child))
        except OSError:
            continue  # reaped meanwhile: its time is in the parent's cutime now
    return total


def machine_ticks() -> tuple[int, int]:
    """(busy, all) CPU ticks of the whole machine so far, from /proc/stat."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def status_figure(pid: int, name: str) -> int:
    """A figure of /proc/PID/status (``VmRSS`` in KiB, ``Threads``), 0 when it has none."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


def pss_mib(pid: int) -> float:
    """Proportional set size: each shared page counted once across its sharers."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def load_average() -> str:
    """The machine's load average over the last minute, as /proc/loadavg gives it."""
    return Path("/proc/loadavg").read_text().split(" ", 3)[0]


def tree(roots: list[int]) -> list[int]:
    """The roots and every process below them."""
    table = parents()
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += [child for child, parent in table.items() if parent == pid]
    return found


def named_roots(program: str) -> list[int]:
    """The processes running ``program`` whose parent does not: each server's first
    process (a PostgreSQL postmaster, a Redis server)."""
    table = parents()
    named = set()
    for pid in table:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == program:
                named.add(pid)
        except OSError:
            continue  # it ended meanwhile
    return sorted(pid for pid in named if table.get(pid) not in named)


def tree_ticks(roots: list[int]) -> int:
    """CPU ticks of every process of the tree and of the children they reaped."""
    total = 0
    for pid in tree(roots):
        try:
            total += sum(cpu_ticks(pid))
        except OSError:
            continue  # ended meanwhile: its time is in its parent's cutime
    return total


def process_label(pid: int) -> str:
    """A short name for a process: its program and the first words that say its role."""
    words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    words = [w.decode(errors="replace") for w in words if w]
    if not words:
        return "?"
    names = [Path(w).name for w in words if not w.startswith("-")]
    if len(names) > 1 and names[0].startswith("python"):
        names = names[1:]
        if names[0] == "manage.py" and len(names) > 1:
            return " ".join(names[1:3])
    return " ".join(names[:2])


def tree_ticks_by_process(roots: list[int]) -> dict[str, int]:
    """CPU ticks of every process of the tree, summed by ``process_label``."""
    found: dict[str, int] = {}
    for pid in tree(roots):
        try:
            label = process_label(pid)
            found[label] = found.get(label, 0) + sum(cpu_ticks(pid))
        except OSError:
            continue
    return found


def tree_pss(roots: list[int]) -> float:
    total = 0.0
    for pid in tree(roots):
        try:
            total += pss_mib(pid)
        except OSError:
            continue
    return total


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def remote_address(hex_address: str) -> str | None:
    """The remote end of a /proc/net/tcp{,6} row unless it is loopback or unbound."""
    address = hex_address.split(":")[0]
    if len(address) == 8:
        octets = [int(address[i : i + 2], 16) for i in (6, 4, 2, 0)]
        return None if octets[0] in (0, 127) else ".".join(map(str, octets))
    words = [address[i : i + 8] for i in range(0, 32, 8)]
    if words[:3] in (["00000000"] * 3, ["00000000", "00000000", "FFFF0000"]):
        last = int(words[3], 16).to_bytes(4, "little")
        if words[2] == "00000000" and last in (b"\0\0\0\0", b"\0\0\0\1"):
            return None  # :: and ::1
        if words[2] == "FFFF0000" and last[0] in (0, 127):
            return None
    return address


def outbound(roots: list[int]) -> set[str]:
    """Remote addresses off loopback of the sockets the tree's processes hold."""
    inodes: set[str] = set()
    for pid in tree(roots):
        try:
            inodes |= socket_inodes(pid)
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[9] in inodes and (remote := remote_address(fields[2])):
                found.add(remote)
    return found


def rss_mib(pid: int) -> float:
    """Resident set size of a process, shared pages counted in full."""
    return status_figure(pid, "VmRSS") / 1024
