"""Where ``run_tests`` runs pytest: a read-only view of the machine, without the server's secrets.

Workspace tests are code the server did not write. They run under ``unshare``
(util-linux) in new mount, network and PID namespaces, whose first process
(``sandbox_init.py``) builds the filesystem the tests see:

- everything is read-only: a recursive copy of ``/`` with every mount remounted
  read-only, entered with ``pivot_root`` so no path leads back to the original;
- writable are only a fresh, private ``/tmp``, ``/var/tmp`` and ``/dev/shm``, the
  run's scratch directory, and the workspace as ``AGENTSITE_RUN_TESTS_WORKSPACE``
  says: a scratch copy of it (``copy``, the default), the workspace itself
  (``writable``), or nothing (``read-only``);
- covered, whatever the settings: the data directory (``.agentsite``: secret key,
  saved login, embedded Redis, local databases), every SQLite file the settings name
  and the default ``db.sqlite3`` with their sidecars, the unix sockets named by
  ``REDIS_URL`` and the database settings, ``/run``, the server user's home (when it
  is not root) and ``AGENTSITE_RUN_TESTS_HIDDEN_PATHS``;
- when the server is root the tests run as ``AGENTSITE_RUN_TESTS_UID`` (nobody by
  default), so root-only files stay closed; a directory that user cannot enter on
  the way to the interpreter or the workspace is covered, and only what the tests
  need is mounted back in it. Otherwise a user namespace maps the server's user;
- the network namespace has only a loopback of its own: no database, Redis or
  other host can be reached;
- ``/proc`` shows the tests' own processes only (no other process's environment);
- pytest starts without any capability and with ``no_new_privs`` (``setpriv``), so
  it cannot undo a mount.

The environment is scrubbed by the caller (``run_tests.subprocess_env``).
``AGENTSITE_RUN_TESTS_SANDBOX`` says what happens where the namespaces are not
available (``unshare`` or ``setpriv`` missing, or the kernel refusing them): ``auto``
runs with the scrubbed environment only, ``required`` fails the job.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from django.conf import settings

from jobs.tools.sandbox_init import SETUP_FAILED

logger = logging.getLogger(__name__)

INIT = Path(__file__).resolve().with_name("sandbox_init.py")
# Fresh and writable in the sandbox.
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
# Covered: where services keep their sockets.
SOCKET_DIRS = ("/run",)
SQLITE_SIDECARS = ("", "-wal", "-shm", "-journal")
SQLITE_PATTERNS = ("*.sqlite3", "*.sqlite", "*.db")
PROBE_TIMEOUT_S = 20.0


__all__ = ["SETUP_FAILED", "SandboxUnavailable", "sandboxed"]


class SandboxUnavailable(RuntimeError):
    """The sandbox is required but this machine cannot make one."""


def as_root() -> bool:
    return os.geteuid() == 0


def unshare_argv(*, root: bool) -> list[str] | None:
    """The command that makes the namespaces: as root a mount namespace of the machine's
    own user namespace; otherwise a user namespace in which the server's user is root."""
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    if unshare is None or setpriv is None:
        return None
    argv = [setpriv, "--pdeathsig", "KILL", "--", unshare]
    if not root:
        argv += ["--user", "--map-root-user"]
    namespaces = ["--mount", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
    return [*argv, *namespaces, "--propagation", "private"]


def tests_user() -> tuple[int, int]:
    """The unprivileged uid and gid the tests run as when the server is root."""
    return settings.AGENTSITE_RUN_TESTS_UID, settings.AGENTSITE_RUN_TESTS_GID


def sqlite_files() -> list[Path]:
    """Every SQLite file the settings name, the default one, and any beside it."""
    names: list[Path] = []
    for database in settings.DATABASES.values():
        if database["ENGINE"].endswith("sqlite3"):
            test_name = (database.get("TEST") or {}).get("NAME")
            names += [Path(str(n)) for n in (database["NAME"], test_name) if n]
    base = Path(settings.BASE_DIR)
    names.append(base / "db.sqlite3")
    names += [found for pattern in SQLITE_PATTERNS for found in base.glob(pattern)]
    return [
        Path(f"{name}{suffix}")
        for name in names
        if str(name) != ":memory:" and "mode=memory" not in str(name)
        for suffix in SQLITE_SIDECARS
    ]


def redis_socket(url: str) -> Path | None:
    parts = urlparse(url)
    if parts.scheme == "unix":
        return Path(parts.path)
    socket_path = parse_qs(parts.query).get("unix_socket_path")
    return Path(socket_path[0]) if socket_path else None


def socket_paths() -> list[Path]:
    """The unix sockets (or their directories) the settings connect to."""
    found = [redis_socket(settings.REDIS_URL)]
    for database in settings.DATABASES.values():
        host = str(database.get("HOST") or "")
        options = database.get("OPTIONS") or {}
        found += [Path(p) for p in (host, str(options.get("unix_socket", ""))) if p.startswith("/")]
    return [path for path in found if path is not None]


def hidden_paths(*, root: bool) -> list[Path]:
    """What the tests must not see, existing and resolved, none inside another."""
    paths = [Path(settings.LOCAL_DIR), *(Path(p) for p in SOCKET_DIRS)]
    paths += sqlite_files() + socket_paths()
    paths += [Path(p) for p in settings.AGENTSITE_RUN_TESTS_HIDDEN_PATHS]
    if not root:
        paths.append(Path.home())  # the server's user: keys, credentials, shell history
    # Covering / would leave the tests nothing to run with.
    return outermost(p.resolve() for p in paths if p.exists() and p.resolve() != Path("/"))


def outermost(paths: Any) -> list[Path]:
    """``paths`` without those that lie in a directory among them."""
    unique = sorted(set(paths))
    return [
        path
        for path in unique
        if not any(other != path and other.is_dir() and is_under(path, other) for other in unique)
    ]


def is_under(path: Path, directory: Path) -> bool:
    return path == directory or path.is_relative_to(directory)


def can_enter(directory: Path, uid: int, gid: int) -> bool:
    status = directory.stat()
    if status.st_uid == uid:
        return bool(status.st_mode & stat.S_IXUSR)
    if status.st_gid == gid:
        return bool(status.st_mode & stat.S_IXGRP)
    return bool(status.st_mode & stat.S_IXOTH)


def closed_ancestors(paths: list[Path], user: tuple[int, int]) -> list[Path]:
    """The first directory on the way to each path that ``user`` may not enter: covered,
    with only the paths mounted back in it."""
    closed = []
    for path in paths:
        for ancestor in reversed(path.parents):
            if not can_enter(ancestor, *user):
                closed.append(ancestor)
                break
    return closed


def copy_workspace(workspace: Path, destination: Path, hidden: list[Path]) -> None:
    """The scratch copy the tests may write: directories, files and links, nothing else,
    and nothing of what is hidden (a data directory in the workspace, say).

    The workspace is live: an entry removed while it is being copied is simply not in the
    copy, even when another one of the same name appears a moment later. Any failure on
    the destination's side still fails the run."""
    hidden_set = {path.resolve() for path in hidden}

    def vanished(error: FileNotFoundError, source: str) -> bool:
        return bool(error.filename == source)

    def copy_folder(source: str, target: str) -> None:
        try:
            entries = list(os.scandir(source))
        except FileNotFoundError as error:
            if vanished(error, source):
                return
            raise
        for entry in entries:
            into = os.path.join(target, entry.name)
            try:
                if Path(entry.path).resolve() in hidden_set:
                    continue
                if entry.is_symlink():
                    os.symlink(os.readlink(entry.path), into)
                elif entry.is_dir(follow_symlinks=False):
                    os.mkdir(into)
                    copy_folder(entry.path, into)
                elif entry.is_file(follow_symlinks=False):
                    shutil.copy2(entry.path, into, follow_symlinks=False)
            except FileNotFoundError as error:
                if not vanished(error, entry.path):
                    raise
        try:
            shutil.copystat(source, target, follow_symlinks=False)
        except FileNotFoundError as error:
            if not vanished(error, source):
                raise

    os.makedirs(destination)
    copy_folder(os.fspath(workspace), os.fspath(destination))


def give_to(user: tuple[int, int], top: Path) -> None:
    uid, gid = user
    os.chown(top, uid, gid)
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


def bind(source: Path, target: Path, *, writable: bool) -> dict[str, Any]:
    return {"source": str(source), "target": str(target), "writable": writable}


def plan(
    argv: list[str],
    *,
    cwd: Path,
    scratch: Path,
    workspace: Path,
    keep: list[Path],
    root: bool | None = None,
) -> dict[str, Any]:
    """What ``sandbox_init.py`` builds and runs, for a server that is root or not (this
    one by default); prepares the scratch directory for it."""
    root = as_root() if root is None else root
    scratch, workspace = scratch.resolve(), workspace.resolve()
    keep = [path.resolve() for path in keep]
    user = tests_user() if root else None
    mode = settings.AGENTSITE_RUN_TESTS_WORKSPACE
    hidden = hidden_paths(root=root)
    binds = [bind(scratch, scratch, writable=True)]
    if mode == "copy":
        copy_workspace(workspace, scratch / "workspace", hidden)
        binds.append(bind(scratch / "workspace", workspace, writable=True))
    else:
        binds.append(bind(workspace, workspace, writable=mode == "writable"))
    binds += [bind(path, path, writable=False) for path in keep if path.exists()]
    if user is not None:
        hidden = outermost([*hidden, *closed_ancestors([workspace, scratch, *keep], user)])
        give_to(user, scratch)
    # What lies in a path mounted back is covered again once it is mounted.
    targets = [Path(b["target"]) for b in binds]
    again = [h for h in hidden if any(h != t and is_under(h, t) for t in targets)]
    (scratch / "root").mkdir()
    drop = ["--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all"]
    if user is not None:
        drop = [f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", *drop]
    return {
        "new_root": str(scratch / "root"),
        "private": list(PRIVATE_DIRS),
        "hide": [{"path": str(p), "dir": p.is_dir()} for p in hidden if p not in again],
        "hide_again": [{"path": str(p), "dir": p.is_dir()} for p in again],
        "binds": binds,
        "cwd": str(cwd),
        "argv": [shutil.which("setpriv") or "setpriv", *drop, "--", *argv],
        "pivot_root": shutil.which("pivot_root") or "pivot_root",
        "ip": shutil.which("ip") or "",
    }


def init_argv(prefix: list[str], the_plan: dict[str, Any], *, python: str = "") -> list[str]:
    """The sandbox's first process, run by this server's interpreter (or ``python``)."""
    return [*prefix, python or sys.executable, "-I", "-S", str(INIT), json.dumps(the_plan)]


@functools.cache
def namespaces_work() -> str | None:
    """None when a sandbox can be made here; else why not (checked once per process)."""
    prefix = unshare_argv(root=as_root())
    if prefix is None or shutil.which("pivot_root") is None:
        return "unshare, setpriv or pivot_root (util-linux) is not installed"
    with tempfile.TemporaryDirectory(prefix="agentsite-sandbox-probe-") as probe:
        scratch, workspace = Path(probe) / "scratch", Path(probe) / "workspace"
        scratch.mkdir()
        workspace.mkdir()
        true = shutil.which("true") or "/bin/true"
        the_plan = plan([true], cwd=workspace, scratch=scratch, workspace=workspace, keep=[])
        try:
            done = subprocess.run(
                init_argv(prefix, the_plan),
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


def sandboxed(
    argv: list[str], *, cwd: Path, scratch: Path, workspace: Path, keep: list[Path]
) -> tuple[list[str], str]:
    """``argv`` wrapped in the sandbox, and the isolation it runs under: ``namespaces``
    or ``none`` (``AGENTSITE_RUN_TESTS_SANDBOX=off``, or ``auto`` where none can be made)."""
    mode = settings.AGENTSITE_RUN_TESTS_SANDBOX
    if mode == "off":
        return argv, "none"
    why_not = namespaces_work()
    if why_not is None:
        prefix = unshare_argv(root=as_root())
        assert prefix is not None
        the_plan = plan(argv, cwd=cwd, scratch=scratch, workspace=workspace, keep=keep)
        return init_argv(prefix, the_plan), "namespaces"
    if mode == "required":
        raise SandboxUnavailable(
            f"run_tests runs tests only in its sandbox, and none can be made here: {why_not}"
        )
    logger.warning("run_tests runs without its sandbox: %s", why_not)
    return argv, "none"
