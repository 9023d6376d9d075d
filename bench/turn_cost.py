"""What one model turn costs the database and the CPU, on each side of the queue.

BENCH_TURNS (default 200) turns of one user, one after another, each a message and
its turn, in sessions of BENCH_TURNS_PER_SESSION (10) turns (a conversation's
history is read at each turn: one session of all the turns would measure its
length), all in this process against the offline model (no network):

- web: ``POST /api/sessions/{id}/messages`` through the real URL stack (Django's
  test client, a Bearer token, the default quotas except the messages-a-minute
  window, which lives in Redis), then its commit's callbacks (the run's enqueue,
  the live publish, the log's watchers);
- turn worker: the run executed by a ``TurnRuntime`` as a turn worker runs it,
  on its database pool (``AGENTSITE_TURN_DB_THREADS`` threads keeping their
  connection); its watcher (one heartbeat and one interrupt query for all of a
  worker's turns at once) is left out, since it does not grow with the turns.

Prints, for each side, the SQL statements per turn (every statement a
connection runs through Django, savepoints included; BEGIN and COMMIT are not
statements Django runs and are not counted) and the CPU per turn of this
process (user plus system, every thread). Beside them, from the same run, the
CPU of one bare statement (``SELECT 1``) as a baseline: a turn's CPU read in
bare statements compares across machines; and the same statement's CPU when it
runs after a 20 ms pause (a lone answer's deltas come about 70 ms apart). The
first BENCH_TURNS_WARMUP (10) turns are not counted. Uses a scratch SQLite
database (or BENCH_DATABASE_URL) and REDIS_URL, or an embedded Redis when
REDIS_URL is unset.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.support import processes_stop, scratch_environment

TURNS = int(os.environ.get("BENCH_TURNS", "200"))
WARMUP = int(os.environ.get("BENCH_TURNS_WARMUP", "10"))
PER_SESSION = int(os.environ.get("BENCH_TURNS_PER_SESSION", "10"))
BARE = 5000
# Shorter than the ~70 ms between a lone answer's deltas at the offline model's pace:
# the cost of a cold start it shows is, if anything, low.
SPACED_GAP_S = 0.02
SPACED = 200


class StatementCount:
    """Statements run through Django on any connection, by the side that ran them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_side: Counter[str] = Counter()
        self.web_thread = threading.get_ident()

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        side = "web" if threading.get_ident() == self.web_thread else "worker"
        with self.lock:
            self.by_side[side] += 1
        return execute(sql, params, many, context)

    def watch(self, connection: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="bench-turn-cost-"))
    os.environ.setdefault("AGENTSITE_QUOTA_LIVE_TURNS", "50")  # the default, not the bench's 0
    owned = scratch_environment(scratch, name="turn-cost")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        return measure()
    finally:
        processes_stop(owned)


def measure() -> int:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.db.backends.signals import connection_created
    from django.test import Client

    from accounts.models import ApiToken
    from sessions.runtime import TurnRuntime
    from sessions.services import session_create

    user, _ = get_user_model().objects.get_or_create(username="bench-turn-cost")
    _, raw = ApiToken.issue(user=user, name="bench")
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    # Made beforehand: creating a session is not part of a turn.
    sessions = [
        session_create(owner=user, model="offline", title="turn cost")
        for _ in range(-(-(WARMUP + TURNS) // PER_SESSION))
    ]

    count = StatementCount()
    count.watch(connection)
    connection_created.connect(lambda connection, **_: count.watch(connection), weak=False)

    runtime = TurnRuntime()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="turn-loop", daemon=True).start()

    def turn(i: int) -> tuple[float, float]:
        """One message and its turn; the CPU seconds of each side."""
        began = time.process_time()
        url = f"/api/sessions/{sessions[i // PER_SESSION].id}/messages"
        response = client.post(url, {"text": f"hello {i}"}, content_type="application/json")
        assert response.status_code == 202, (response.status_code, response.content[:300])
        web = time.process_time()
        ended = asyncio.run_coroutine_threadsafe(
            runtime.execute(response.json()["run_id"]), loop
        ).result()
        assert ended == "completed", ended
        return web - began, time.process_time() - web

    for i in range(WARMUP):
        turn(i)
    count.by_side.clear()
    cpu = {"web": 0.0, "worker": 0.0}
    for i in range(TURNS):
        web_s, worker_s = turn(WARMUP + i)
        cpu["web"] += web_s
        cpu["worker"] += worker_s
    loop.call_soon_threadsafe(loop.stop)
    runtime.shutdown()
    statements = Counter(count.by_side)
    report(connection.vendor, statements, cpu, bare_statement_ms())
    spaced_ms = bare_statement_ms(gap_s=SPACED_GAP_S, count=SPACED)
    print(
        f"the same statement {1000 * SPACED_GAP_S:.0f} ms after the thread last ran:"
        f" {spaced_ms:.3f} ms of CPU (what a lone event pays in each thread it wakes)"
    )
    return 0


def bare_statement_ms(*, gap_s: float = 0.0, count: int = BARE) -> float:
    """CPU of this thread per ``SELECT 1`` through Django's cursor, in milliseconds: back
    to back, or each after a pause of ``gap_s``, as a lone answer's deltas come (a
    thread woken after a pause runs on cold caches, and pays for it)."""
    from django.db import connection

    spent = 0.0
    with connection.cursor() as cursor:
        if not gap_s:
            began = time.thread_time()
            for _ in range(count):
                cursor.execute("SELECT 1")
                cursor.fetchone()
            return 1000 * (time.thread_time() - began) / count
        for _ in range(count):
            time.sleep(gap_s)
            began = time.thread_time()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            spent += time.thread_time() - began
    return 1000 * spent / count


def report(vendor: str, statements: Counter[str], cpu: dict[str, float], bare_ms: float) -> None:
    print(f"\n{TURNS} turns on {vendor} (after {WARMUP} not counted)")
    print(f"{'side':<14}{'statements/turn':>17}{'CPU ms/turn':>13}{'in bare statements':>20}")
    total_ms = 0.0
    for side in ("web", "worker"):
        ms = 1000 * cpu[side] / TURNS
        total_ms += ms
        label = "web" if side == "web" else "turn worker"
        print(f"{label:<14}{statements[side] / TURNS:>17.1f}{ms:>13.2f}{ms / bare_ms:>20.0f}")
    both = (statements["web"] + statements["worker"]) / TURNS
    print(f"{'both':<14}{both:>17.1f}{total_ms:>13.2f}{total_ms / bare_ms:>20.0f}")
    print(f"baseline: one bare statement (SELECT 1) costs {bare_ms:.3f} ms of CPU here")


if __name__ == "__main__":
    sys.exit(main())
