"""The Responses API against agentsite's own sessions API, in the same run.

1. Time to first text: ``POST /v1/responses`` with ``stream: true`` (continuing
   one session through ``previous_response_id``) until the first
   ``response.output_text.delta``, against ``POST /api/sessions/{id}/messages``
   then ``GET /api/runs/{run}/stream`` until the first ``assistant_delta``;
   the two alternate, BENCH_RESPONSES_ROUNDS messages each.
2. Resume: reconnect → first replayed event, ``GET /v1/responses/{id}?stream=true
   &starting_after=N`` against ``GET /api/runs/{run}/stream?continuation_token=…``
   at the same place of a finished turn.

Prints p50/p95 of each and the ratios (targets: time to first text ≤ 1.1x the
sessions API's, resume p50 ≤ 50 ms). One daphne and one turn worker on a
scratch SQLite database (or BENCH_DATABASE_URL) and REDIS_URL or an embedded
Redis; the offline model, so the figures are agentsite's own overhead.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.support import (
    BASE_DIR,
    daphne_start,
    percentile,
    process_start,
    processes_stop,
    scratch_environment,
    workers_wait,
)

ROUNDS = int(os.environ.get("BENCH_RESPONSES_ROUNDS", "30"))


def ms(values: list[float]) -> str:
    return (
        f"p50 {1000 * statistics.median(values):6.1f} ms"
        f"  p95 {1000 * percentile(values, 0.95):6.1f} ms"
    )


def sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON of each ``data:`` line, with the SSE ``id`` of its event when it has one."""
    event_id = None
    for line in lines:
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
            data["_id"] = event_id
            yield data


class Responses:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.previous: str | None = None
        self.last: tuple[str, int] | None = None

    def first_text(self) -> float:
        body: dict[str, Any] = {"model": "offline", "input": "hello", "stream": True}
        if self.previous:
            body["previous_response_id"] = self.previous
        started = time.perf_counter()
        first = None
        with self.client.stream("POST", "/v1/responses", json=body) as answer:
            for event in sse(answer.iter_lines()):
                if first is None and event["type"] == "response.output_text.delta":
                    first = time.perf_counter() - started
                if event["type"] == "response.created":
                    self.previous = event["response"]["id"]
                last = event["sequence_number"]
        assert first is not None and self.previous is not None
        self.last = (self.previous, last)
        return first

    def resume(self) -> float:
        assert self.last is not None
        response_id, last = self.last
        params = {"stream": "true", "starting_after": str(last // 2)}
        started = time.perf_counter()
        with self.client.stream("GET", f"/v1/responses/{response_id}", params=params) as answer:
            for _ in sse(answer.iter_lines()):
                return time.perf_counter() - started
        raise AssertionError("nothing replayed")


class Sessions:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.session_id = client.post("/api/sessions", json={"model": "offline"}).json()[
            "session_id"
        ]
        self.last: tuple[str, str] | None = None

    def first_text(self) -> float:
        started = time.perf_counter()
        posted = self.client.post(
            f"/api/sessions/{self.session_id}/messages", json={"text": "hello"}
        ).json()
        run_id, first, tokens = posted["run_id"], None, []
        with self.client.stream("GET", f"/api/runs/{run_id}/stream") as answer:
            for frame in sse(answer.iter_lines()):
                if first is None and frame["kind"] == "assistant_delta":
                    first = time.perf_counter() - started
                tokens.append(frame["token"])
        assert first is not None
        self.last = (run_id, tokens[len(tokens) // 2])
        return first

    def resume(self) -> float:
        assert self.last is not None
        run_id, token = self.last
        started = time.perf_counter()
        url = f"/api/runs/{run_id}/stream"
        params = {"continuation_token": token}
        with self.client.stream("GET", url, params=params) as answer:
            for _ in sse(answer.iter_lines()):
                return time.perf_counter() - started
        raise AssertionError("nothing replayed")


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-responses-"))
    owned = scratch_environment(scratch, name="responses")
    os.environ["AGENTSITE_MODEL"] = "offline"
    import django

    django.setup()
    import httpx
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from accounts.models import ApiToken
    from sessions.worker import TURN_WORKER_ARGS

    call_command("migrate", interactive=False, verbosity=0)
    user = get_user_model().objects.create_user(f"bench-{os.getpid()}", password="bench-pw")
    _, api_token = ApiToken.issue(user=user, name="bench")
    manage = str(BASE_DIR / "manage.py")
    owned.append(process_start([manage, *TURN_WORKER_ARGS], log=scratch / "worker-turns.log"))
    daphne, port = daphne_start(scratch)
    owned.append(daphne)
    base = f"http://127.0.0.1:{port}"
    try:
        workers_wait("turns")
        headers = {"Authorization": f"Bearer {api_token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            responses, sessions = Responses(client), Sessions(client)
            responses.first_text(), sessions.first_text()  # warm both paths up
            first: dict[str, list[float]] = {"responses": [], "sessions": []}
            resume: dict[str, list[float]] = {"responses": [], "sessions": []}
            for _ in range(ROUNDS):
                for name, api in (("responses", responses), ("sessions", sessions)):
                    first[name].append(api.first_text())
                    resume[name].append(api.resume())
        ratio = statistics.median(first["responses"]) / statistics.median(first["sessions"])
        print(f"first text, sessions API   {ms(first['sessions'])}")
        print(
            f"first text, Responses API  {ms(first['responses'])}  "
            f"({ratio:4.2f}x; target ≤ 1.1x: {'met' if ratio <= 1.1 else 'MISSED'})"
        )
        p50 = statistics.median(resume["responses"])
        print(f"resume, sessions API       {ms(resume['sessions'])}")
        print(
            f"resume, Responses API      {ms(resume['responses'])}  "
            f"(target p50 ≤ 50 ms: {'met' if p50 <= 0.050 else 'MISSED'})"
        )
    finally:
        processes_stop(owned)
    return 0


if __name__ == "__main__":
    sys.exit(main())
