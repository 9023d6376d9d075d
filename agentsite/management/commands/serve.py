"""Run the whole stack in one terminal: Redis (when needed), web, workers, scheduler.

Each process's output is prefixed with its name. A process that exits is
started again after a backoff (1 s, doubling up to 30 s), so a crash or an
outage underneath costs that process a restart, not the whole app; only a
process that keeps failing (``GIVE_UP_AFTER`` exits within ``GIVE_UP_WINDOW_S``)
stops everything. Ctrl-C (or SIGTERM) stops them all: SIGTERM to each process
group, then SIGKILL after a grace period, so nothing is left behind.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from agentsite.core.embedded_redis import (
    private_redis_command,
    private_redis_socket,
    redis_answers,
    unix_socket_url,
    wait_for_redis,
)
from agentsite.core.private_files import private_dir
from sessions.worker import TURN_WORKER_ARGS

COLORS = ["\033[36m", "\033[35m", "\033[33m", "\033[32m", "\033[34m"]
RESET = "\033[0m"
# Long enough for a turn worker to let its turns finish and hand back the rest.
GRACE_S = settings.AGENTSITE_TURN_STOP_GRACE_S + 10.0
RESTART_BACKOFF_S = (1.0, 30.0)
GIVE_UP_AFTER = 5
# How often the watch looks at the parent and at restarts due; a child's exit wakes it at once.
WATCH_EVERY_S = 1.0
GIVE_UP_WINDOW_S = 60.0


def daphne_verbosity() -> int:
    """daphne's ``-v`` for ``LOG_LEVEL``: 1 (its default, a line for every request) at
    INFO, 2 at DEBUG, 0 above INFO, where daphne logs warnings only and no requests."""
    level = logging.getLogger().getEffectiveLevel()
    return 2 if level <= logging.DEBUG else 1 if level <= logging.INFO else 0


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    color: str = ""
    threads: list[threading.Thread] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    exits: list[float] = field(default_factory=list)
    restart_at: float | None = None


class Command(BaseCommand):
    help = (
        "Run agentsite: web, turn and tool workers, scheduler, and Redis when neither REDIS_URL "
        "nor REDIS_SENTINELS is set."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--tool-workers", type=int, default=1)
        parser.add_argument("--turn-workers", type=int, default=1)

    def handle(self, *args: Any, **options: Any) -> None:
        self.children: list[Child] = []
        self.stopping = False
        self.lock = threading.Lock()
        self.woken = threading.Event()
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        env = dict(os.environ)
        try:
            if not os.environ.get("REDIS_URL") and not settings.REDIS_SENTINELS:
                env["REDIS_URL"] = self.start_redis()
            call_command("migrate", interactive=False, verbosity=0)
            call_command("ensure_login")
            self.start_stack(env, options)
            self.say(
                f"agentsite is up on http://{options['host']}:{options['port']}/ (Ctrl-C stops it)"
            )
            self.watch()
        finally:
            self.stop_all()

    def start_redis(self) -> str:
        data_dir = private_dir(settings.LOCAL_DIR / "redis")
        socket_path = private_redis_socket(data_dir)
        if redis_answers(unix_socket_url(socket_path)):  # another run's, still up: leave it be
            socket_path = private_redis_socket(Path(tempfile.mkdtemp(prefix="agentsite-redis-")))
        socket_path.unlink(missing_ok=True)  # left by a Redis that was killed
        self.spawn(Child("redis", private_redis_command(socket_path, data_dir)), dict(os.environ))
        url = unix_socket_url(socket_path)
        wait_for_redis(url)
        self.say(f"embedded Redis on {url} (a unix socket only this user can open)")
        return url

    def start_stack(self, env: dict[str, str], options: dict[str, Any]) -> None:
        python = sys.executable
        manage = str(settings.BASE_DIR / "manage.py")
        self.spawn(
            Child(
                "web",
                [
                    python,
                    "-m",
                    "daphne",
                    "-b",
                    options["host"],
                    "-p",
                    str(options["port"]),
                    "-v",
                    str(daphne_verbosity()),
                    "agentsite.asgi:application",
                ],
            ),
            env,
        )
        for i in range(options["turn_workers"]):
            self.spawn(
                Child(f"turns{i + 1}", [python, manage, *TURN_WORKER_ARGS]),
                env,
            )
        for i in range(options["tool_workers"]):
            self.spawn(
                Child(f"tools{i + 1}", [python, manage, "rqworker", "tools", "default"]), env
            )
        self.spawn(Child("cron", [python, manage, "scheduler"]), env)

    def spawn(self, child: Child, env: dict[str, str]) -> None:
        child.color = COLORS[len(self.children) % len(COLORS)]
        child.env = env
        self.launch(child)
        self.children.append(child)

    def launch(self, child: Child) -> None:
        child.process = subprocess.Popen(
            child.argv,
            env={**child.env, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stop_all reaches grandchildren
        )
        assert child.process.stdout is not None
        thread = threading.Thread(target=self.pump, args=(child, child.process.stdout), daemon=True)
        thread.start()
        child.threads.append(thread)

    def pump(self, child: Child, stream: IO[bytes]) -> None:
        width = max(len(c.name) for c in [*self.children, child])
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            with self.lock:
                sys.stdout.write(f"{child.color}{child.name:<{width}} |{RESET} {line}\n")
                sys.stdout.flush()

    def say(self, message: str) -> None:
        with self.lock:
            sys.stdout.write(f"\033[1m{message}{RESET}\n")
            sys.stdout.flush()

    def watch(self) -> None:
        # `make run` killed by a supervisor (not by Ctrl-C, which reaches the whole
        # process group) would leave this process orphaned: follow the parent out.
        parent = os.getppid()
        # Woken by a child's exit (or a stop), else once every WATCH_EVERY_S: an idle
        # stack costs this process a look a second, not three.
        signal.signal(signal.SIGCHLD, lambda signum, frame: self.woken.set())
        while not self.stopping:
            self.woken.clear()
            if os.getppid() != parent:
                self.say("the parent process exited; stopping everything")
                return
            for child in self.children:
                if not self.supervise(child):
                    return
            self.woken.wait(WATCH_EVERY_S)

    def supervise(self, child: Child) -> bool:
        """Restart ``child`` after a backoff if it exited; False when it keeps failing."""
        assert child.process is not None
        now = time.monotonic()
        if child.restart_at is not None:
            if now >= child.restart_at and not self.stopping:
                child.restart_at = None
                self.launch(child)
                self.say(f"{child.name} started again")
            return True
        code = child.process.poll()
        if code is None or self.stopping:
            return True
        child.exits = [t for t in child.exits if now - t < GIVE_UP_WINDOW_S] + [now]
        if len(child.exits) >= GIVE_UP_AFTER:
            self.say(
                f"{child.name} exited {len(child.exits)} times in {GIVE_UP_WINDOW_S:.0f}s "
                f"(last code {code}); stopping everything"
            )
            return False
        first, most = RESTART_BACKOFF_S
        delay = min(most, first * 2 ** (len(child.exits) - 1))
        self.say(f"{child.name} exited with code {code}; starting it again in {delay:.0f}s")
        child.restart_at = now + delay
        return True

    def on_signal(self, signum: int, frame: object) -> None:
        self.stopping = True
        self.woken.set()

    def stop_all(self) -> None:
        self.stopping = True
        # Redis goes last so the others can finish their current write.
        ordered = sorted(self.children, key=lambda c: c.name == "redis")
        for child in ordered:
            if child.name != "redis":
                self.signal_group(child, signal.SIGTERM)
        self.wait_children([c for c in ordered if c.name != "redis"])
        for child in ordered:
            if child.name == "redis":
                self.signal_group(child, signal.SIGTERM)
        self.wait_children([c for c in ordered if c.name == "redis"])
        if self.children:
            self.say("stopped")

    def signal_group(self, child: Child, signum: int) -> None:
        if child.process is None or child.process.poll() is not None:
            return
        try:
            os.killpg(child.process.pid, signum)
        except ProcessLookupError:
            pass

    def wait_children(self, children: list[Child]) -> None:
        deadline = time.monotonic() + GRACE_S
        for child in children:
            assert child.process is not None
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"{child.name} did not stop in {GRACE_S:.0f}s; killing it")
                self.signal_group(child, signal.SIGKILL)
                child.process.wait()
            # Whatever the leader left in its group goes too.
            try:
                os.killpg(child.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
