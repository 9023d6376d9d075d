"""What a REST request costs the web process: agentsite's handler against Django's own.

One daphne serving ``agentsite.asgi`` on a scratch database (SQLite, or
``BENCH_DATABASE_URL``) and Redis, no workers, twice in the same run: with
Django's own ASGI handler (``AGENTSITE_REQUEST_THREADS=0``: each request a thread
and a database connection of its own, the middleware chain and the view reached
across four thread hand-offs) as the baseline, then with agentsite's
(``agentsite.web.handler``: the chain and the view in one hand-off, on kept threads
that keep their connection). For each, N clients at once (``BENCH_USERS``, default
1 and 50), each with its own API token, send ``BENCH_REQUESTS`` (default 20)
requests one after another of each kind:

- ``GET /api/sessions/{id}``: the token, the session, its JSON;
- ``POST /api/sessions/{id}/messages`` to a session with no turn yet: the token,
  the quotas, the message's transaction, a new run and its RQ enqueue.

It prints daphne's CPU per request (utime + stime from /proc over the requests,
divided by them), the latency p50/p95 the clients saw, and the ratio of the two
handlers. Usage::

    .venv/bin/python -m bench.requests
    BENCH_USERS=50 BENCH_REQUESTS=40 .venv/bin/python -m bench.requests
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.support import (
    TICKS_PER_S,
    api_tokens,
    cpu_ticks,
    daphne_start,
    percentile,
    processes_stop,
    scratch_environment,
)

LEVELS = [int(n) for n in os.environ.get("BENCH_USERS", "1,50").split(",")]
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "20"))
HANDLERS = (("Django's handler", "0"), ("agentsite's handler", ""))


@dataclass
class Measured:
    cpu_ms: float
    latencies_ms: list[float] = field(default_factory=list)


class Client:
    def __init__(self, url: str, tokens: list[str]) -> None:
        self.url = url
        self.tokens = tokens

    def headers(self, i: int) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[i]}"}

    async def session(self, http: aiohttp.ClientSession, i: int) -> str:
        async with http.post(f"{self.url}/api/sessions", json={}, headers=self.headers(i)) as r:
            if r.status != 201:
                raise SystemExit(f"POST /api/sessions answered {r.status}: {await r.text()}")
            return str((await r.json())["session_id"])

    async def get(self, http: aiohttp.ClientSession, i: int, sid: str) -> None:
        async with http.get(f"{self.url}/api/sessions/{sid}", headers=self.headers(i)) as r:
            if r.status != 200:
                raise SystemExit(f"GET a session answered {r.status}: {await r.text()}")
            await r.read()

    async def post(self, http: aiohttp.ClientSession, i: int, sid: str) -> None:
        url = f"{self.url}/api/sessions/{sid}/messages"
        async with http.post(url, json={"text": "hello"}, headers=self.headers(i)) as r:
            if r.status != 202:
                raise SystemExit(f"POST a message answered {r.status}: {await r.text()}")
            await r.read()


async def measure(client: Client, pid: int, users: int) -> dict[str, Measured]:
    async with aiohttp.ClientSession() as http:
        # A session per user to read, and one per message to post (each a new turn).
        readable = [await client.session(http, i) for i in range(users)]
        fresh = [[await client.session(http, i) for _ in range(REQUESTS)] for i in range(users)]
        for i in range(users):  # warm-up: every connection and code path once
            await client.get(http, i, readable[i])
        found: dict[str, Measured] = {}
        for kind in ("GET", "POST"):
            latencies: list[float] = []

            async def user(i: int, kind: str = kind, latencies: list[float] = latencies) -> None:
                for n in range(REQUESTS):
                    began = time.perf_counter()
                    if kind == "GET":
                        await client.get(http, i, readable[i])
                    else:
                        await client.post(http, i, fresh[i][n])
                    latencies.append(1000 * (time.perf_counter() - began))

            before = cpu_ticks(pid)[0]
            await asyncio.gather(*(user(i) for i in range(users)))
            spent = (cpu_ticks(pid)[0] - before) / TICKS_PER_S
            found[kind] = Measured(1000 * spent / (users * REQUESTS), latencies)
        return found


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-requests-"))
    owned = scratch_environment(scratch, name="requests")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    tokens = api_tokens(max(LEVELS), username_prefix="requests-user")
    print(
        f"users {', '.join(map(str, LEVELS))}; {REQUESTS} requests of each kind a user,"
        f" one after another; database {os.environ['DATABASE_URL'].split(':')[0]}; logs in"
        f" {scratch}"
    )
    results: dict[tuple[str, int], dict[str, Measured]] = {}
    try:
        for name, threads in HANDLERS:
            os.environ["AGENTSITE_REQUEST_THREADS"] = threads
            daphne, port = daphne_start(scratch)
            try:
                client = Client(f"http://127.0.0.1:{port}", tokens)
                for users in LEVELS:
                    results[(name, users)] = asyncio.run(measure(client, daphne.pid, users))
            finally:
                processes_stop([daphne])
    finally:
        os.environ.pop("AGENTSITE_REQUEST_THREADS", None)
        processes_stop(owned)
    print()
    print("  users  request  handler               CPU/request   p50      p95")
    print("                                        (ms)          (ms)     (ms)")
    for users in LEVELS:
        for kind in ("GET", "POST"):
            for name, _ in HANDLERS:
                m = results[(name, users)][kind]
                print(
                    f"  {users:5d}  {kind:7s}  {name:20s}  {m.cpu_ms:10.2f}"
                    f"  {percentile(m.latencies_ms, 0.5):7.1f}"
                    f"  {percentile(m.latencies_ms, 0.95):7.1f}"
                )
            base, ours = (results[(name, users)][kind] for name, _ in HANDLERS)
            p95 = percentile(ours.latencies_ms, 0.95) / percentile(base.latencies_ms, 0.95)
            print(
                f"  {users:5d}  {kind:7s}  agentsite/Django: CPU {ours.cpu_ms / base.cpu_ms:.2f}x,"
                f" p95 {p95:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
