"""The built-in async tools started through the job API and run by real RQ workers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from jobs.models import Job, JobChunk
from tests.conftest import wait_until
from tests.jobs.factories import start_job, started_job_id, wait_for_status

pytestmark = pytest.mark.django_db(transaction=True)

TERMINAL = ("done", "failed", "cancelled", "timed_out")


class TinySite(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        pages = {
            "/robots.txt": "User-agent: *\nDisallow: /admin\n",
            "/": "<title>Home</title><a href='/about'>about</a><a href='/admin'>admin</a>",
            "/about": "<title>About</title><p>we sell fruit</p><a href='/'>home</a>",
        }
        body = pages.get(self.path, "<title>Not found</title>").encode()
        self.send_response(200 if self.path in pages else 404)
        self.send_header(
            "Content-Type", "text/plain" if self.path == "/robots.txt" else "text/html"
        )
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def tiny_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), TinySite)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_run_tests_runs_the_demo_suite_in_a_worker(api_client: Any, rq_workers: Any) -> None:
    job_id = started_job_id(api_client, "run_tests", {"path": "tests"})
    job = wait_for_status(job_id, *TERMINAL, timeout=60)

    assert job.status == "done", job.error_message
    assert job.result is not None
    assert job.result["summary"] == "31 passed, 2 failed (tests/test_pricing.py)"
    page = api_client.get(f"/api/jobs/{job_id}/result?cursor=0&limit=100").json()
    assert len(page["items"]) == 33
    assert page["complete"] is True
    assert {item["outcome"] for item in page["items"]} == {"passed", "failed"}


def test_run_tests_refuses_a_path_outside_the_workspace(api_client: Any) -> None:
    response = start_job(api_client, "run_tests", {"path": "../agentsite"})

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_arguments"
    assert "outside the workspace" in error["details"][0]["message"]


def pytest_runs_of(worker_pids: set[int]) -> list[int]:
    """Pids of run_tests' pytest processes started by work horses of these workers."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"agentsite_live_report" not in (entry / "cmdline").read_bytes():
                continue
            horse = parent_pid(int(entry.name))
            if parent_pid(horse) in worker_pids:
                found.append(int(entry.name))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return found


def parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_cancelling_a_test_run_stops_its_pytest_process(api_client: Any, rq_workers: Any) -> None:
    worker_pids = {proc.pid for proc in rq_workers.procs}
    job_id = started_job_id(api_client, "run_tests", {"path": "tests/test_warehouse.py"})
    wait_until(lambda: JobChunk.objects.filter(job_id=job_id).exists(), timeout=30)
    running = pytest_runs_of(worker_pids)
    assert running

    assert api_client.delete(f"/api/jobs/{job_id}").json()["status"] in ("cancelling", "done")

    job = wait_for_status(job_id, *TERMINAL, timeout=15)
    assert job.status == "cancelled"
    assert job.error_message == "Stopped on request."
    wait_until(lambda: not set(running) & set(pytest_runs_of(worker_pids)), timeout=10)


def test_a_test_run_past_its_deadline_ends_timed_out(api_client: Any, rq_workers: Any) -> None:
    worker_pids = {proc.pid for proc in rq_workers.procs}
    job_id = started_job_id(
        api_client, "run_tests", {"path": "tests/test_warehouse.py"}, timeout_s=1
    )
    wait_until(lambda: pytest_runs_of(worker_pids) or Job.objects.get(id=job_id).is_terminal)
    running = pytest_runs_of(worker_pids)

    job = wait_for_status(job_id, *TERMINAL, timeout=15)

    assert job.status == "timed_out"
    assert JobChunk.objects.filter(job_id=job_id).count() < 5
    wait_until(lambda: not set(running) & set(pytest_runs_of(worker_pids)), timeout=10)


def test_crawl_site_crawls_a_local_site_in_a_worker(
    api_client: Any, rq_workers: Any, tiny_site: str
) -> None:
    job_id = started_job_id(api_client, "crawl_site", {"url": tiny_site})
    job = wait_for_status(job_id, *TERMINAL, timeout=30)

    assert job.status == "done", job.error_message
    assert job.result is not None
    host = tiny_site.removeprefix("http://")
    assert job.result["summary"] == f"crawled 2 pages on {host}: 2 ok, 1 blocked by robots.txt"
    items = list(JobChunk.objects.filter(job_id=job_id).values_list("item", flat=True))
    assert [(i["url"], i["title"]) for i in items] == [
        (f"{tiny_site}/", "Home"),
        (f"{tiny_site}/about", "About"),
    ]


def test_write_report_waits_for_a_test_run_and_reports_on_it(
    api_client: Any, rq_workers: Any
) -> None:
    tests_job = started_job_id(api_client, "run_tests", {"path": "tests/test_pricing.py"})
    report_job = started_job_id(
        api_client,
        "write_report",
        {"topic": "pricing", "source_job_ids": [tests_job]},
        depends_on=[tests_job],
    )
    job = wait_for_status(report_job, *TERMINAL, timeout=60)

    assert job.status == "done", job.error_message
    assert Job.objects.get(id=tests_job).status == "done"
    assert job.result is not None
    assert job.result["summary"] == (
        "Report: pricing: 4 sections, 2 finding(s), from 1 source job(s)"
    )
    assert "## Findings\n\n1. Test `tests/test_pricing.py::" in job.result["markdown"]
    headings = JobChunk.objects.filter(job_id=report_job).values_list("item__heading", flat=True)
    assert list(headings) == ["Summary", f"Test results ({tests_job})", "Findings", "Next steps"]
