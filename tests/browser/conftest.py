"""Headless Chromium against a live daphne and real RQ workers.

Chromium is Debian's package, driven through Playwright's Python API with
``executable_path``. When it is missing the setup installs it (as root, with
apt-get) if it can; where no browser can be had the tests skip with the
reason — except under ``CI=true``, where a missing browser fails the run.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from sessions.worker import TURN_WORKER_ARGS
from tests.conftest import ARTIFACTS, Processes, wait_for_workers
from tests.sessions.test_stream_clients import daphne_serve

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Slow the offline model's output a little so that replies visibly stream.
WORKER_ENV = {"AGENTSITE_OFFLINE_OUTPUT_TOKEN_S": "0.04", "AGENTSITE_OFFLINE_CALL_S": "0.1"}


def no_browser(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true requires a browser: {reason}")
    pytest.skip(reason)


def chromium_find() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium") or ""):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def chromium_install() -> str:
    """Install Debian's chromium when this process may (root with apt-get); why not if not.

    The suite's xdist workers may all get here at once: a file lock lets one run
    apt-get while the others wait for it and then find the browser it installed.
    """
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "it could not be installed (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open("/tmp/agentsite-chromium-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if chromium_find() is not None:
            return ""
        update = ["apt-get", "update"]
        subprocess.run(update, env=env, capture_output=True, timeout=600, check=False)
        done = subprocess.run(
            ["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
    said = (done.stderr or done.stdout).strip().splitlines()
    return f"apt-get install chromium failed: {said[-1] if said else done.returncode}"


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = chromium_find()
    if path is None:
        why = chromium_install()
        path = chromium_find()
    if path is None:
        no_browser(f"no Chromium at /usr/bin/chromium and {why}")
    assert path is not None
    return path


@pytest.fixture(scope="module")
def browser(chromium_path: str, django_db_setup: None) -> Iterator[Any]:
    """One Chromium per test module: Playwright's sync API holds an event loop on this
    thread while it runs, which must not outlive the browser tests."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        no_browser("the playwright package is not installed (pip install -e '.[dev]')")
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        # Playwright's loop stays current on this thread while the browser is up; the
        # ORM calls the tests (and the database teardown) make meanwhile are still
        # plain synchronous code.
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="package")
def site(processes: Processes) -> Iterator[str]:
    """The base URL of a live daphne, with a turn worker and a tool worker behind it.

    Package-scoped: these workers run a slowed offline model, so they stop when
    the browser tests end rather than serve the rest of the suite's queues.
    """
    started = [
        processes.start("browser-turns", *TURN_WORKER_ARGS, env=WORKER_ENV),
        processes.start("browser-tools", "rqworker", "tools", "default", env=WORKER_ENV),
    ]
    wait_for_workers("turns", 1)
    wait_for_workers("tools", 1)
    before = len(processes.procs)
    url = daphne_serve(processes, "browser-daphne")
    started += processes.procs[before:]
    yield url
    for proc in started:
        processes.stop(proc)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def login_context(browser: Any, site: str, user: Any) -> Any:
    """A browser context holding a logged-in Django session for ``user``."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(viewport={"width": 1100, "height": 850}, accept_downloads=True)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": site,
            }
        ]
    )
    return context


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: Any, site: str, user: Any) -> Iterator[Any]:
    context = login_context(browser, site, user)
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    failed = getattr(request.node, "report_call", None)
    if failed is not None and failed.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for i, open_page in enumerate(context.pages):
            open_page.screenshot(
                path=str(ARTIFACTS / f"{request.node.name}-{i}.png"), full_page=True
            )
    context.close()


def pytest_itemcollected(item: pytest.Item) -> None:
    """Under ``--dist loadgroup`` one xdist worker runs every browser test, so that only
    one starts the browser's daphne and slowed workers."""
    item.add_marker(pytest.mark.xdist_group("browser"))
