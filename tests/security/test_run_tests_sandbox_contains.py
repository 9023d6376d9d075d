"""A hostile workspace: its tests try every way out of run_tests' sandbox, and each is refused.

Each probe is a workspace test that passes only if its escape works, so a run in
which every probe fails is a sandbox that holds. They run as this suite runs
(root on CI: the tests then run as an unprivileged uid), and again as a server
that is not root would run them: the sandbox built for an unprivileged server, in
a user namespace, started by that user.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from agentsite.core.embedded_redis import redis_server_executable, wait_for_redis
from jobs.tools import sandbox
from jobs.tools.context import LocalToolContext
from jobs.tools.run_tests import run_tests_tool as RUN_TESTS
from tests.conftest import BASE_DIR

NOBODY = 65534


def in_a_private_directory(path: Path) -> bool:
    """True for a path the sandbox gives a fresh directory in place of (/tmp, ...)."""
    shared = [Path(d) for d in (*sandbox.PRIVATE_DIRS, *sandbox.SOCKET_DIRS)]
    return any(sandbox.is_under(path.resolve(), d.resolve()) for d in shared)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory of the server's outside the workspace, /tmp and every hidden path:
    in the checkout, or in /var/lib for a checkout that lies in /tmp itself."""
    parents = [BASE_DIR / "test-artifacts", Path("/var/lib")]
    parent = next((p for p in parents if not in_a_private_directory(p)), None)
    if parent is None or not os.access(parent.parent, os.W_OK):
        pytest.skip("no writable directory outside the sandbox's private ones")
    folder = parent / f"agentsite-sandbox-outside-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def redis_on_a_socket(outside: Path) -> Iterator[Path]:
    """A real redis-server on a unix socket anyone may open, outside every hidden directory."""
    socket_path = outside / "redis.sock"
    server = subprocess.Popen(
        [
            redis_server_executable(),
            *("--save", "", "--appendonly", "no", "--dir", str(outside)),
            *("--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "777"),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for_redis(f"unix://{socket_path}")
        redis.Redis(unix_socket_path=str(socket_path)).set("sandbox-probe", "reachable")
        yield socket_path
    finally:
        server.terminate()
        server.wait()


@pytest.fixture
def default_sqlite(outside: Path) -> Iterator[Path]:
    """The default ``db.sqlite3`` in the project directory, whatever DATABASE_URL says."""
    path = BASE_DIR / "db.sqlite3"
    made = not path.exists()
    if made:
        path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84)
    yield path
    if made:
        path.unlink()


@pytest.fixture
def planted_pth() -> Iterator[Path]:
    """Where a test would plant code for the server; removed should a broken sandbox let it."""
    path = Path(sysconfig.get_paths()["purelib"]) / "agentsite_escape.pth"
    yield path
    path.unlink(missing_ok=True)


def probes(outside: Path, socket_path: Path, database: Path) -> str:
    site_packages = sysconfig.get_paths()["purelib"]
    marker = outside / "written.txt"
    marker.write_text("untouched\n")
    marker.chmod(0o666)  # the file mode allows it: only the sandbox refuses
    return f"""
import glob, os, socket, subprocess

def test_appends_to_a_file_outside_the_workspace():
    with open({str(marker)!r}, "a") as f:
        f.write("escaped\\n")

def test_plants_a_pth_file_in_site_packages():
    open(os.path.join({site_packages!r}, "agentsite_escape.pth"), "w").close()

def test_edits_the_servers_settings():
    open({str(BASE_DIR / "agentsite" / "settings.py")!r}, "a").close()

def test_edits_etc_passwd():
    open("/etc/passwd", "a").close()

def test_reads_etc_shadow():
    assert open("/etc/shadow").read()

def test_talks_to_redis_on_its_socket():
    client = socket.socket(socket.AF_UNIX)
    client.settimeout(3)
    client.connect({str(socket_path)!r})
    client.sendall(b"PING\\r\\n")
    assert client.recv(64).startswith(b"+PONG")

def test_reads_the_default_sqlite_database():
    assert open({str(database)!r}, "rb").read(16) == b"SQLite format 3\\x00"

def test_changes_what_covers_the_database():
    os.chmod({str(database)!r}, 0o600)

def test_reads_another_processs_environment():
    found = []
    for path in glob.glob("/proc/*/environ"):
        try:
            found.append(b"PATH=" in open(path, "rb").read() and "/self/" not in path)
        except OSError:
            pass
    assert len([f for f in found if f]) > 2

def test_makes_the_filesystem_writable_again():
    subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
         "mount -o remount,bind,rw / && echo x >> /etc/passwd"],
        check=True, capture_output=True,
    )

def test_writes_the_workspace_copy_and_a_private_tmp():
    open("written-by-a-test.txt", "w").write("mine")
    open("/tmp/written-by-a-test.txt", "w").write("mine")
    assert open("written-by-a-test.txt").read() == open("/tmp/written-by-a-test.txt").read()
"""


ESCAPES = {
    "test_appends_to_a_file_outside_the_workspace",
    "test_plants_a_pth_file_in_site_packages",
    "test_edits_the_servers_settings",
    "test_edits_etc_passwd",
    "test_reads_etc_shadow",
    "test_talks_to_redis_on_its_socket",
    "test_reads_the_default_sqlite_database",
    "test_changes_what_covers_the_database",
    "test_reads_another_processs_environment",
    "test_makes_the_filesystem_writable_again",
}


def test_a_hostile_workspace_gets_out_nowhere(
    tmp_path: Path,
    outside: Path,
    redis_on_a_socket: Path,
    default_sqlite: Path,
    planted_pth: Path,
) -> None:
    (tmp_path / "test_escapes.py").write_text(probes(outside, redis_on_a_socket, default_sqlite))
    passwd = Path("/etc/passwd").read_bytes()

    with override_settings(
        AGENTSITE_WORKSPACE=tmp_path,
        REDIS_URL=f"unix://{redis_on_a_socket}?db=0",
        AGENTSITE_RUN_TESTS_SANDBOX="required",
    ):
        result = RUN_TESTS.run({}, LocalToolContext())

    failures = {f["nodeid"].rsplit("::", 1)[1]: f["message"] for f in result["failures"]}
    assert result["sandbox"] == "namespaces"
    assert set(failures) == ESCAPES, failures
    assert result["passed"] == 1  # the workspace copy and the private /tmp are writable
    assert (outside / "written.txt").read_text() == "untouched\n"
    assert not planted_pth.exists()
    assert Path("/etc/passwd").read_bytes() == passwd
    assert stat.S_IMODE(os.stat("/dev/null").st_mode) == 0o666
    # What the tests wrote stayed in their copy and their /tmp.
    assert not (tmp_path / "written-by-a-test.txt").exists()
    assert not Path("/tmp/written-by-a-test.txt").exists()
    # The file's mode lets anyone write it: the read-only view is what refuses.
    assert "Read-only file system" in failures["test_appends_to_a_file_outside_the_workspace"]
    if os.geteuid() == 0:
        assert "Permission denied" in failures["test_reads_etc_shadow"]


def test_a_workspace_in_the_project_directory_gets_no_copy_of_the_data_directory(
    tmp_path: Path,
) -> None:
    """``AGENTSITE_WORKSPACE`` set to the project itself: the secrets stay hidden, and are
    not copied into the scratch copy either."""
    secret_key = Path(settings.LOCAL_DIR) / "secret_key"
    assert secret_key.exists()
    # The project's own test settings run in the copy and make a key of their own there:
    # the probe reads for the server's.
    digest = hashlib.sha256(secret_key.read_bytes()).hexdigest()
    probe = (
        "import hashlib\n\n"
        "def test_reads_the_secret_key():\n"
        f"    data = open({str(secret_key)!r}, 'rb').read()\n"
        f"    assert hashlib.sha256(data).hexdigest() == {digest!r}\n"
    )
    folder = BASE_DIR / f".sandbox-probe-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    try:
        (folder / "test_secret.py").write_text(probe)
        with override_settings(AGENTSITE_WORKSPACE=BASE_DIR):
            result = RUN_TESTS.run({"path": f"{folder.name}/test_secret.py"}, LocalToolContext())
    finally:
        shutil.rmtree(folder)

    assert result["failed"] == 1, result
    assert settings.SECRET_KEY not in json.dumps(result)


# --- as a server that is not root ---------------------------------------------------

UNPRIVILEGED_PROBES = """
import json, os, socket, sys

def attempt(action):
    try:
        action()
        return "escaped"
    except OSError as exc:
        return exc.strerror

def append(path):
    return lambda: open(path, "a").close()

def read(path):
    return lambda: open(path, "rb").read(1)

def redis(path):
    def talk():
        client = socket.socket(socket.AF_UNIX)
        client.settimeout(3)
        client.connect(path)
    return talk

marker, secret, socket_path = sys.argv[1:4]
print(json.dumps({
    "append outside": attempt(append(marker)),
    "read the data directory": attempt(read(secret)),
    "redis socket": attempt(redis(socket_path)),
    "tcp to the local redis": attempt(lambda: socket.create_connection(("127.0.0.1", 6379), 2)),
    "write the workspace copy": attempt(append("mine.txt")),
    "write /tmp": attempt(append("/tmp/mine.txt")),
}))
"""


@pytest.fixture
def unprivileged_server(outside: Path) -> Path:
    """A directory the unprivileged server owns: its workspace, scratch and data files."""
    home = outside / "server"
    for folder in (home, home / "workspace", home / "scratch", home / "data"):
        folder.mkdir()
    (home / "data" / "secret_key").write_text("not for tests\n")
    (home / "workspace" / "probes.py").write_text(UNPRIVILEGED_PROBES)
    (home / "marker.txt").write_text("untouched\n")
    for path in [home, *home.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    return home


@pytest.mark.skipif(os.geteuid() != 0, reason="starts the server's side as another user")
def test_the_sandbox_of_an_unprivileged_server_holds_too(
    unprivileged_server: Path, redis_on_a_socket: Path
) -> None:
    home = unprivileged_server
    python = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
    with override_settings(LOCAL_DIR=home / "data", REDIS_URL=f"unix://{redis_on_a_socket}?db=0"):
        prefix = sandbox.unshare_argv(root=False)
        assert prefix is not None
        plan = sandbox.plan(
            [
                python,
                "-I",
                "probes.py",
                str(home / "marker.txt"),
                str(home / "data" / "secret_key"),
                str(redis_on_a_socket),
            ],
            cwd=home / "workspace",
            scratch=home / "scratch",
            workspace=home / "workspace",
            keep=[],
            root=False,
        )
    sandbox.give_to((NOBODY, NOBODY), home / "scratch")  # as the server would have made it
    # The server's own copy of the sandbox's first process, readable by it wherever
    # this checkout lies (a checkout in a private temporary directory, say).
    init = home / "sandbox_init.py"
    shutil.copy(sandbox.INIT, init)
    os.chown(init, NOBODY, NOBODY)
    argv = [
        str(init) if arg == str(sandbox.INIT) else arg
        for arg in sandbox.init_argv(prefix, plan, python=python)
    ]
    as_the_server = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    done = subprocess.run(
        [*as_the_server, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )

    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)
    assert outcomes == {
        "append outside": "Read-only file system",
        "read the data directory": "No such file or directory",
        "redis socket": "Connection refused",
        "tcp to the local redis": "Connection refused",  # its own loopback, no Redis
        "write the workspace copy": "escaped",
        "write /tmp": "escaped",
    }
    assert (home / "marker.txt").read_text() == "untouched\n"
    assert not (home / "workspace" / "mine.txt").exists()


def test_tests_never_run_in_a_half_built_sandbox(tmp_path: Path) -> None:
    """A step of the set-up that fails (here a path to mount back that has gone) ends
    the run before the tests start, with a line that says why."""
    marker = tmp_path / "scratch" / "ran"
    (tmp_path / "scratch").mkdir()
    (tmp_path / "workspace").mkdir()
    plan = sandbox.plan(
        ["/bin/touch", str(marker)],
        cwd=tmp_path / "workspace",
        scratch=tmp_path / "scratch",
        workspace=tmp_path / "workspace",
        keep=[],
    )
    plan["binds"].append(sandbox.bind(tmp_path / "gone", tmp_path / "gone", writable=False))
    prefix = sandbox.unshare_argv(root=sandbox.as_root())
    assert prefix is not None

    done = subprocess.run(sandbox.init_argv(prefix, plan), capture_output=True, text=True)

    assert done.returncode == sandbox.SETUP_FAILED
    assert done.stderr.startswith("agentsite sandbox: could not be set up: ")
    assert "No such file or directory" in done.stderr
    assert not marker.exists()


def test_a_test_that_swaps_the_runs_output_for_a_root_only_file_reads_nothing_of_it(
    tmp_path: Path, outside: Path
) -> None:
    """The tests own their scratch directory: one that puts a link to a file only root
    may read where pytest's output was, then dies, must not have the server read it
    into the job's error."""
    secret = outside / "root-only.txt"
    token = uuid.uuid4().hex
    secret.write_text(token)
    secret.chmod(0o600)
    (tmp_path / "test_swap.py").write_text(
        "import os\n\n"
        "def test_swaps_the_output_and_dies():\n"
        "    scratch = os.path.dirname(os.environ['AGENTSITE_REPORT_PATH'])\n"
        "    output = os.path.join(scratch, 'output.txt')\n"
        "    os.rename(output, output + '.old')\n"
        f"    os.symlink({str(secret)!r}, output)\n"
        "    os._exit(3)\n"
    )

    with override_settings(AGENTSITE_WORKSPACE=tmp_path, AGENTSITE_RUN_TESTS_SANDBOX="required"):
        with pytest.raises(RuntimeError, match="pytest ended before finishing the run") as raised:
            RUN_TESTS.run({}, LocalToolContext())

    assert token not in str(raised.value)
