"""A body over AGENTSITE_MAX_BODY_BYTES is refused before the web process holds it.

A real daphne gets 200 MB unauthenticated POSTs, declared by Content-Length or
streamed chunked from a generator; its peak resident memory (VmHWM in
/proc/<pid>/status) must not grow by anything near the body's size.
"""

from __future__ import annotations

import json
import select
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from django.conf import settings

from tests.conftest import Processes
from tests.sessions.test_stream_clients import daphne_serve

pytestmark = pytest.mark.django_db(transaction=True)

BODY_BYTES = 200 * 1024 * 1024
CHUNK = b"x" * (256 * 1024)
# Generous: a process that buffered the body would grow by BODY_BYTES or more.
ALLOWED_GROWTH = 40 * 1024 * 1024


@pytest.fixture
def site(processes: Processes) -> Iterator[tuple[str, int]]:
    """A daphne of its own for each test, so that its peak memory is the test's."""
    url = daphne_serve(processes, "daphne-body-limit")
    proc = processes.named("daphne-body-limit")
    yield url, proc.pid
    processes.stop(proc)


def memory_kb(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` figure in kB: VmRSS now, VmHWM the peak so far."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def body_chunks(total: int) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        chunk = CHUNK[: total - sent]
        sent += len(chunk)
        yield chunk


def post_streamed(url: str, path: str, *, chunked: bool) -> tuple[int, bytes]:
    """POST BODY_BYTES as a well-behaved client does: stop sending once an answer arrives.

    Returns the status and body of the answer.
    """
    parts = urlsplit(url)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {BODY_BYTES}"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"{framing}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall(head.encode())
        for chunk in body_chunks(BODY_BYTES):
            if select.select([sock], [], [], 0)[0]:
                break  # the server has answered: the rest is not wanted
            data = b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk
            try:
                sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                break
        else:
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except ConnectionResetError:
            pass
    head_bytes, _, body = answer.partition(b"\r\n\r\n")
    assert head_bytes, "no answer"
    return int(head_bytes.split()[1]), body


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_big_body_is_refused_before_it_is_buffered(site: tuple[str, int], chunked: bool) -> None:
    url, pid = site
    httpx.get(f"{url}/api/openapi.json", timeout=30)  # the process has warmed up
    peak_before = memory_kb(pid, "VmHWM")

    status, body = post_streamed(url, "/api/jobs", chunked=chunked)

    peak_after = memory_kb(pid, "VmHWM")
    assert status == 413
    if not chunked:  # a chunked answer's body is framed; the status is what matters there
        assert json.loads(body) == {
            "error": {
                "code": "too_large",
                "message": "The request body is larger than AGENTSITE_MAX_BODY_BYTES allows.",
                "details": {"max_bytes": settings.DATA_UPLOAD_MAX_MEMORY_SIZE},
            }
        }
    grown = (peak_after - peak_before) * 1024
    print(f"daphne peak RSS {peak_before} kB -> {peak_after} kB for a {BODY_BYTES} byte body")
    assert grown < ALLOWED_GROWTH, f"peak RSS grew by {grown} bytes"


def test_a_body_within_the_limit_still_reaches_the_api(site: tuple[str, int]) -> None:
    url, _ = site
    response = httpx.post(f"{url}/api/jobs", content=b"{}" + b" " * 1000, timeout=30)

    assert response.status_code == 401  # no token: the API itself answered


def test_a_page_outside_the_api_gets_a_plain_413(site: tuple[str, int]) -> None:
    url, _ = site
    status, body = post_streamed(url, "/accounts/login/", chunked=False)

    assert status == 413 and b"larger than" in body


def test_a_declared_length_over_the_limit_is_refused_without_reading_the_body(
    site: tuple[str, int],
) -> None:
    url, _ = site
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(
            f"POST /api/jobs HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Content-Length: {BODY_BYTES}\r\n\r\n".encode()
        )
        answer = sock.recv(65536)  # no body byte sent, and the answer comes anyway

    assert answer.startswith(b"HTTP/1.1 413")
