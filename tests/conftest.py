"""Shared fixtures: users and API clients, real RQ workers, the scheduler."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import django_rq
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import OperationalError, connection
from django.db.backends.base.operations import BaseDatabaseOperations
from django.test import Client
from rq import Worker
from rq.worker import BaseWorker

from accounts.models import ApiToken
from sessions.worker import TURN_WORKER_ARGS
from tests.servers import OwnRedis

BASE_DIR = Path(__file__).resolve().parent.parent
# Per test database, and per pytest-xdist worker ("gw0", ...) when there are several.
ARTIFACTS = (
    BASE_DIR
    / "test-artifacts"
    / os.environ.get("AGENTSITE_TEST_DB", "test")
    / os.environ.get("PYTEST_XDIST_WORKER", "")
)


# --- flushing between transactional tests ------------------------------------------

_execute_sql_flush = BaseDatabaseOperations.execute_sql_flush


def execute_sql_flush_retrying(self: BaseDatabaseOperations, sql_list: Iterable[str]) -> None:
    """Retry the between-tests TRUNCATE when PostgreSQL picks it as a deadlock victim.

    Real workers keep running across tests; one that is still finishing the
    previous test's work can hold a row lock in the opposite order to the
    TRUNCATE's table locks. Retrying after the worker's transaction ends is
    what a person would do, and loses nothing: the flush is all-or-nothing.
    """
    for attempt in range(6):
        try:
            _execute_sql_flush(self, list(sql_list))
            return
        except OperationalError as exc:
            if "deadlock" not in str(exc) or attempt == 5:
                raise
            time.sleep(0.2 * (attempt + 1))


BaseDatabaseOperations.execute_sql_flush = execute_sql_flush_retrying  # type: ignore[method-assign,assignment]


@pytest.fixture(scope="session", autouse=True)
def stray_connections_closed(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Let the test database be dropped at the end of the run.

    In-process ASGI tests touch the database from asgiref's worker threads, each
    with a connection of its own that outlives the test; PostgreSQL refuses to
    drop a database with open sessions, so they are ended here, after every
    worker subprocess has stopped.
    """
    yield
    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )


# --- people and clients ----------------------------------------------------------


@functools.cache
def password_hash(password: str) -> str:
    """Each password hashed once per process: Django's PBKDF2 hasher (1,000,000 rounds)
    takes about half a second of CPU, which every test's user would otherwise pay again."""
    return make_password(password)


@pytest.fixture
def make_user(db: None) -> Callable[..., Any]:
    User = get_user_model()
    counter = iter(range(1, 10_000))

    def make(username: str | None = None, **extra: Any) -> Any:
        name = username or f"user{next(counter)}"
        return User.objects.create(username=name, password=password_hash("pw-" + name), **extra)

    return make


@pytest.fixture
def user(make_user: Callable[..., Any]) -> Any:
    return make_user("alice")


@pytest.fixture
def other_user(make_user: Callable[..., Any]) -> Any:
    return make_user("mallory")


def api_client_for(user: Any) -> Client:
    _, raw = ApiToken.issue(user=user, name="test")
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    client.raw_token = raw  # type: ignore[attr-defined]
    return client


@pytest.fixture
def api_client(user: Any) -> Client:
    """A REST client authenticated as ``user`` with a Bearer token."""
    return api_client_for(user)


@pytest.fixture
def other_api_client(other_user: Any) -> Client:
    return api_client_for(other_user)


# --- processes -----------------------------------------------------------------------


def database_url_for_subprocesses() -> str:
    """The URL of the database the tests are using (the test database, not the real one)."""
    cfg = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{cfg['NAME']}"
    if "," in str(cfg.get("HOST") or ""):
        # Several hosts (libpq's list): the configured URL, its options included, on
        # the test database.
        return urlunsplit(urlsplit(settings.DATABASE_URL)._replace(path=f"/{cfg['NAME']}"))
    user = cfg.get("USER") or ""
    password = f":{cfg['PASSWORD']}" if cfg.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{cfg['PORT']}" if cfg.get("PORT") else ""
    return f"postgres://{auth}{cfg.get('HOST') or '127.0.0.1'}{port}/{cfg['NAME']}"


def subprocess_env() -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url_for_subprocesses(),
        "REDIS_URL": settings.REDIS_URL,
        "AGENTSITE_REDIS_PREFIX": settings.REDIS_PREFIX,
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "PYTHONUNBUFFERED": "1",
        # A process that will not stop is sent SIGABRT (Processes.stop): its log then
        # holds every thread's stack.
        "PYTHONFAULTHANDLER": "1",
    }


def python_elsewhere(code: str, env: dict[str, str]) -> str:
    """What ``code`` prints, run after ``django.setup()`` in a process of its own with
    ``env`` (``subprocess_env()``): another host, which reaches the database when this
    process does not."""
    done = subprocess.run(
        [sys.executable, "-c", f"import django\ndjango.setup()\n{code}"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def run_writers(script: str, session_id: str, writers: int, per_writer: int) -> None:
    """Run ``writers`` copies of a Python ``script`` at once, each given the session id,
    its number and ``per_writer``, against the test database; all must exit 0."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, session_id, str(w), str(per_writer)],
            cwd=BASE_DIR,
            env=subprocess_env(),
            stderr=subprocess.PIPE,
        )
        for w in range(writers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()


class Processes:
    """Starts manage.py subprocesses against the test database and stops them all."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.names: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[int, Path] = {}
        ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def start(
        self, name: str, *argv: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``manage.py`` with ``argv``."""
        return self.start_python(name, str(BASE_DIR / "manage.py"), *argv, env=env)

    @staticmethod
    def artifact(name: str) -> Path:
        """Where the process started as ``name`` logs."""
        return ARTIFACTS / f"{name}.log"

    def start_python(
        self, name: str, *argv: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start this interpreter with ``argv`` (``-m daphne …``), logging to test-artifacts/."""
        path = self.artifact(name)
        log = open(path, "ab")
        proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=BASE_DIR,
            env={**subprocess_env(), **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        self.names[name] = proc
        self.logs[proc.pid] = path
        return proc

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 10) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                warnings.warn(
                    self.hung(proc, f"did not stop within {timeout:g}s of SIGTERM"), stacklevel=2
                )
                proc.kill()
                proc.wait()
        try:
            os.killpg(proc.pid, 9)  # stray work horses
        except (ProcessLookupError, PermissionError):
            pass

    def wait_for_exit(self, proc: subprocess.Popen[bytes], timeout: float) -> int:
        """``proc``'s exit code; a process still running after ``timeout`` fails the test
        with its threads' stacks."""
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(self.hung(proc, f"still running after {timeout:g}s"))

    def hung(self, proc: subprocess.Popen[bytes], what: str) -> str:
        """Abort a hung process (faulthandler writes every thread's stack to its log) and
        say what it was doing: the end of its log."""
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        return self.log_tail(proc, what)

    def log_tail(self, proc: subprocess.Popen[bytes], what: str) -> str:
        """``what`` of process ``proc``, with the end of its log."""
        path = self.logs.get(proc.pid)
        tail = path.read_text(errors="replace")[-6000:] if path else "(no log)"
        argv = " ".join(str(arg) for arg in list(proc.args)[1:4])  # type: ignore[arg-type]
        return f"process {proc.pid} ({argv}) {what}; its log ends:\n{tail}"

    def named(self, name: str) -> subprocess.Popen[bytes]:
        """The last process started under ``name``."""
        return self.names[name]

    def stop_all(self) -> None:
        # Ask them all first, so that their shutdowns (a worker finishing its job,
        # RQ's deregistration) overlap rather than add up.
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            self.stop(proc)


def alive(pid: int) -> bool:
    """Process ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def registered_worker(pid: int) -> BaseWorker | None:
    """The RQ worker registered by process ``pid``, if any."""
    workers = Worker.all(connection=django_rq.get_connection("default"))
    return next((worker for worker in workers if worker.pid == pid), None)


def unregister_worker(pid: int) -> None:
    """Forget the RQ registration of a worker that was killed (it cannot do so itself)."""
    worker = registered_worker(pid)
    if worker is not None:
        worker.register_death()


def wait_for_workers(queue_name: str, count: int, timeout: float = 30) -> None:
    queue = django_rq.get_queue(queue_name)
    deadline = time.monotonic() + timeout
    while len(Worker.all(queue=queue)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{count} worker(s) for {queue_name!r} did not start; see test-artifacts/"
            )
        time.sleep(0.1)


def wait_for_idle_workers(queue_name: str, timeout: float = 60) -> None:
    """Until no worker on ``queue_name`` runs a job: a job of an earlier test that ends
    hands its freed slot to whatever job the database holds, the next test's included."""
    queue = django_rq.get_queue(queue_name)
    wait_until(
        lambda: all(w.get_state() != "busy" for w in Worker.all(queue=queue)), timeout=timeout
    )


@pytest.fixture(scope="session")
def processes(django_db_setup: None, django_db_blocker: Any) -> Iterator[Processes]:
    procs = Processes()
    yield procs
    procs.stop_all()


@pytest.fixture(scope="session")
def rq_workers(processes: Processes) -> Processes:
    """Real RQ workers for the whole run: a turn worker, two on ``tools``/``default``.

    Tests that use them must commit their data: mark them
    ``@pytest.mark.django_db(transaction=True)``.
    """
    processes.start("worker-turns", *TURN_WORKER_ARGS)
    processes.start("worker-tools-1", "rqworker", "tools", "default")
    processes.start("worker-tools-2", "rqworker", "tools", "default")
    wait_for_workers("turns", 1)
    wait_for_workers("tools", 2)
    return processes


@pytest.fixture
def rq_scheduler(processes: Processes) -> Processes:
    """RQ's cron scheduler running agentsite's periodic tasks: started by the first test
    that asks for it (or the first after one that stopped it), then left running."""
    running = processes.names.get("scheduler")
    if running is None or running.poll() is not None:
        processes.start("scheduler", "scheduler")
    return processes


@pytest.fixture
def no_scheduler(processes: Processes) -> None:
    """No scheduler during this test: its sweep would hand the test's held jobs to RQ.

    The next test that asks for ``rq_scheduler`` starts it again.
    """
    running = processes.names.get("scheduler")
    if running is not None:
        processes.stop(running)


def wait_until(predicate: Callable[[], Any], timeout: float = 20, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with a message otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def pytest_collection_modifyitems(session: pytest.Session, config: Any, items: list[Any]) -> None:
    """Run the browser tests first.

    They run their own workers with a slowed model (so a person could watch the
    text stream); those must be the only workers on the queues while they run,
    so they go before the suite-wide ``rq_workers`` start.
    """
    browser_dir = BASE_DIR / "tests" / "browser"
    items.sort(key=lambda item: 0 if browser_dir in Path(str(item.path)).parents else 1)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    """A Redis of the test's own, which it may kill and start again (``tests.servers``)."""
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.kill()
