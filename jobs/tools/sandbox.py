"""Where ``run_tests`` runs pytest: in Linux namespaces of its own, without the server's secrets.

Workspace tests are code the server did not write. They run under ``unshare``
(util-linux) with new mount, network and PID namespaces (and a user namespace
when the server is not root), where:

- the server's data directory (``.agentsite``: the secret key, the saved login,
  the embedded Redis, local databases), the SQLite database file and its
  sidecars, and the directories holding sockets and scratch files (``/tmp``,
  ``/var/tmp``, ``/run``, ``/dev/shm``) are covered by empty tmpfs mounts or
  ``/dev/null``; the workspace and the run's own scratch directory are mounted
  back in;
- there is no network but a loopback of its own, so no database or Redis
  server can be reached;
- ``/proc`` shows the tests' own processes only (no other process's environment);
- pytest starts without any capability (``setpriv``), so it cannot undo the mounts.

The environment is scrubbed by the caller (``run_tests.subprocess_env``).
``AGENTSITE_RUN_TESTS_SANDBOX`` says what happens where the namespaces are not
available (``unshare`` or ``setpriv`` missing, or the kernel refusing them).
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

SHARED_DIRS = ("/tmp", "/var/tmp", "/run", "/dev/shm")
SQLITE_SIDECARS = ("", "-wal", "-shm", "-journal")
PROBE_TIMEOUT_S = 20.0


class SandboxUnavailable(RuntimeError):
    """The sandbox is required but this machine cannot make one."""


def unshare_argv() -> list[str] | None:
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    if unshare is None or setpriv is None:
        return None
    argv = [setpriv, "--pdeathsig", "KILL", "--", unshare]
    if os.geteuid() != 0:
        argv += ["--user", "--map-root-user"]
    namespaces = ["--mount", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
    return [*argv, *namespaces, "--propagation", "private"]


def hidden_paths() -> list[Path]:
    """What the tests must not see: the data directory, the SQLite files, shared dirs."""
    paths = [Path(settings.LOCAL_DIR), *(Path(p) for p in SHARED_DIRS)]
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3") and str(database["NAME"]) != ":memory:":
        name = str(database["NAME"])
        paths += [Path(name + suffix) for suffix in SQLITE_SIDECARS]
    paths += [Path(p) for p in settings.AGENTSITE_RUN_TESTS_HIDDEN_PATHS]
    existing = sorted({path.resolve() for path in paths if path.exists()})
    # What lies in a covered directory is covered with it.
    return [
        path
        for path in existing
        if not any(other != path and other.is_dir() and is_under(path, other) for other in existing)
    ]


def is_under(path: Path, directory: Path) -> bool:
    return path == directory or path.is_relative_to(directory)


def setup_script(argv: list[str], *, cwd: Path, keep: list[Path]) -> str:
    """The shell script run inside the namespaces: cover, mount back, drop capabilities, run."""
    hidden = hidden_paths()
    keep = [path.resolve() for path in keep]
    covered = [k for k in keep if any(is_under(k, h) for h in hidden if h.is_dir())]
    lines = ["set -e"]
    # Directories to mount back are held open, so they stay reachable once covered.
    lines += [f"exec {3 + i}< {shlex.quote(str(path))}" for i, path in enumerate(covered)]
    for path in hidden:
        quoted = shlex.quote(str(path))
        if path.is_dir():
            lines.append(f"mount -t tmpfs -o size=1m,mode=0755 agentsite-hidden {quoted}")
        else:
            lines.append(f"mount --bind /dev/null {quoted}")
    for i, path in enumerate(covered):
        quoted = shlex.quote(str(path))
        lines.append(f"mkdir -p {quoted}")
        lines.append(f"mount --no-canonicalize --bind /proc/self/fd/{3 + i} {quoted}")
        lines.append(f"exec {3 + i}<&-")
    lines.append("ip link set lo up 2>/dev/null || true")
    lines.append(f"cd {shlex.quote(str(cwd))}")
    setpriv = shlex.quote(shutil.which("setpriv") or "setpriv")
    drop = "--no-new-privs --bounding-set=-all --inh-caps=-all --ambient-caps=-all"
    lines.append("set +e")
    lines.append(f"{setpriv} {drop} -- {shlex.join(argv)}")
    lines.append("exit $?")
    return "\n".join(lines) + "\n"


@functools.cache
def namespaces_work() -> str | None:
    """None when a sandbox can be made here; else why not (checked once per process)."""
    prefix = unshare_argv()
    if prefix is None:
        return "unshare or setpriv (util-linux) is not installed"
    with tempfile.TemporaryDirectory(prefix="agentsite-sandbox-probe-") as probe:
        script = setup_script(["true"], cwd=Path(probe), keep=[Path(probe)])
        try:
            done = subprocess.run(
                [*prefix, "/bin/sh", "-c", script],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare could not run: {exc}"
    if done.returncode != 0:
        return f"unshare failed: {(done.stderr or done.stdout).strip()[-300:]}"
    return None


def sandboxed(argv: list[str], *, cwd: Path, keep: list[Path]) -> tuple[list[str], str]:
    """``argv`` wrapped in the sandbox, and the isolation it runs under: ``namespaces``
    or ``none`` (``AGENTSITE_RUN_TESTS_SANDBOX=off``, or ``auto`` where none can be made)."""
    mode = settings.AGENTSITE_RUN_TESTS_SANDBOX
    if mode == "off":
        return argv, "none"
    why_not = namespaces_work()
    if why_not is None:
        prefix = unshare_argv()
        assert prefix is not None
        return [*prefix, "/bin/sh", "-c", setup_script(argv, cwd=cwd, keep=keep)], "namespaces"
    if mode == "required":
        raise SandboxUnavailable(
            f"run_tests runs tests only in its sandbox, and none can be made here: {why_not}"
        )
    logger.warning("run_tests runs without its sandbox: %s", why_not)
    return argv, "none"
