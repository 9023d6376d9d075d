"""The first process of ``run_tests``' sandbox: builds its filesystem, then runs the tests.

Run by ``jobs/tools/sandbox.py`` as ``python -I -S sandbox_init.py PLAN`` inside fresh
mount, network and PID namespaces (``unshare``), as the namespaces' init. It uses the
standard library only (no site-packages, no Django) and does, in order:

1. bind the whole filesystem, recursively, onto ``new_root``, and make every mount
   of that copy read-only (keeping each mount's own nosuid/nodev/noexec flags);
2. mount a fresh, writable tmpfs on each private directory (``/tmp``, ...);
3. cover each hidden path: a directory by an empty tmpfs, a file (a database, a
   socket) by ``/dev/null``;
4. mount back what the tests need, from the original tree (each path alone, not
   what is mounted inside it): the scratch directory and the workspace writable or
   not as the plan says, the interpreter read-only; then cover again what is hidden
   inside those;
5. make the covers read-only, ``pivot_root`` into the copy and detach the original
   tree, so that no path (``/proc/1/root`` included) leads back to it;
6. bring up the namespace's own loopback and run the tests without any capability
   (``setpriv``), as the plan's unprivileged uid when the server is root.

Any step that fails ends the run with exit status 125 and one line on stderr:
tests never run in a half-built sandbox.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from typing import Any

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_RELATIME = 1 << 21
MNT_DETACH = 2
# statvfs flags that are mount flags too (same bits on Linux).
KEPT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME
SETUP_FAILED = 125

libc = ctypes.CDLL(None, use_errno=True)


def encoded(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    done = libc.mount(encoded(source), encoded(target), encoded(fstype), flags, encoded(data))
    if done != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def read_only(target: str) -> None:
    """Remount ``target``'s mount read-only, keeping the flags it has (a user namespace
    may not clear them)."""
    flags = os.statvfs(target).f_flag & KEPT_FLAGS
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def unescaped(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (space, tab, newline, backslash as octal)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_points_under(root: str) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as mounts:
        points = [unescaped(line.split()[4]) for line in mounts]
    return sorted({p for p in points if p == root or p.startswith(root + "/")})


def inside(new_root: str, path: str) -> str:
    return new_root + path


def tolerated(exc: OSError) -> bool:
    """A path the setup cannot reach (gone, or closed to this uid) the tests cannot reach either."""
    return exc.errno in (2, 13)  # ENOENT, EACCES


def make_read_only_copy(new_root: str) -> None:
    mount("/", new_root, None, MS_BIND | MS_REC)
    for point in mount_points_under(new_root):
        try:
            read_only(point)
        except OSError as exc:
            if not tolerated(exc):
                raise


def mount_private(new_root: str, directory: str) -> None:
    target = inside(new_root, directory)
    if os.path.isdir(target):
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")


def cover(new_root: str, path: str, is_dir: bool) -> str | None:
    """Cover ``path``; the covering tmpfs (made read-only once all is mounted back)."""
    target = inside(new_root, path)
    try:
        if is_dir:
            mount("agentsite-hidden", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
            return target
        mount("/dev/null", target, None, MS_BIND)
        read_only(target)
    except OSError as exc:
        if not tolerated(exc):
            raise
    return None


def bind(new_root: str, source: str, target: str, writable: bool) -> None:
    """Mount ``source`` (from the original, writable tree) at ``target`` in the copy."""
    destination = inside(new_root, target)
    if os.path.isdir(source):
        os.makedirs(destination, mode=0o755, exist_ok=True)
    elif not os.path.exists(destination):
        os.makedirs(os.path.dirname(destination), mode=0o755, exist_ok=True)
        open(destination, "a").close()
    mount(source, destination, None, MS_BIND)
    if not writable:
        read_only(destination)


def enter(new_root: str, pivot_root: str) -> None:
    """Make ``new_root`` the root and detach the original tree (``pivot_root . .``)."""
    os.chdir(new_root)
    subprocess.run([pivot_root, ".", "."], check=True, capture_output=True)
    if libc.umount2(b".", MNT_DETACH) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"detaching the original root: {os.strerror(errno)}")
    os.chdir("/")


def build(plan: dict[str, Any]) -> None:
    new_root = plan["new_root"]
    make_read_only_copy(new_root)
    for directory in plan["private"]:
        mount_private(new_root, directory)
    covers = [cover(new_root, h["path"], h["dir"]) for h in plan["hide"]]
    for item in plan["binds"]:
        bind(new_root, item["source"], item["target"], item["writable"])
    covers += [cover(new_root, h["path"], h["dir"]) for h in plan["hide_again"]]
    for target in covers:
        if target is not None:
            read_only(target)
    enter(new_root, plan["pivot_root"])
    if plan["ip"]:
        # The namespace's own loopback, for tests that serve on 127.0.0.1.
        subprocess.run([plan["ip"], "link", "set", "lo", "up"], capture_output=True, check=False)
    os.chdir(plan["cwd"])


def run(plan: dict[str, Any]) -> int:
    """Run the tests as a child, reap every orphan (this process is the namespace's
    init), and end with the tests' exit status."""
    child = subprocess.Popen(plan["argv"], close_fds=True)
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return child.returncode if child.returncode is not None else SETUP_FAILED
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


def main() -> int:
    plan = json.loads(sys.argv[1])
    try:
        build(plan)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr.decode(errors="replace").strip() if hasattr(exc, "stderr") else ""
        print(f"agentsite sandbox: could not be set up: {exc} {detail}".strip(), file=sys.stderr)
        return SETUP_FAILED
    return run(plan)


if __name__ == "__main__":
    sys.exit(main())
