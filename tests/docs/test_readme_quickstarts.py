"""The README's quickstarts, run as written against a live server.

The commands are read from README.md itself: the ```sh block that follows each
``<!-- quickstart: NAME -->`` marker. Each runs with bash from the checkout's
directory, as a reader would run it in a second terminal beside ``make run``,
with one substitution: the address ``http://127.0.0.1:8000`` becomes this test's
daphne. Instead of ``make run`` (which installs first) the processes it starts
are the suite's own: a daphne (``daphne_serve``), a turn worker and two tool
workers (``rq_workers``), all on the test database. The blocks make their own
tokens with ``create_api_token``, which runs on the test database too
(``subprocess_env``), for the ``admin`` login that ``ensure_login`` (what
``make run`` runs at start) creates here.
"""

from __future__ import annotations

import ast
import re
import subprocess
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agentsite import settings as project_settings
from sessions.models import ToolApprovalRule
from tests.conftest import BASE_DIR, Processes, subprocess_env
from tests.sessions.test_stream_clients import daphne_serve

pytestmark = pytest.mark.django_db(transaction=True)

README = BASE_DIR / "README.md"
ADDRESS = "http://127.0.0.1:8000"


def readme_block(name: str) -> str:
    """The ```sh block after ``<!-- quickstart: name -->`` (the first one, if several)."""
    text = README.read_text()
    marker = f"<!-- quickstart: {name} -->"
    assert marker in text, f"README.md has no {marker}"
    after = text.split(marker, 1)[1]
    found = re.search(r"^```sh\n(.*?)^```$", after, re.S | re.M)
    assert found is not None, f"no ```sh block after {marker}"
    return found.group(1)


def section(name: str) -> str:
    """The README's text from the marker to the next heading."""
    after = README.read_text().split(f"<!-- quickstart: {name} -->", 1)[1]
    return after.split("\n#", 1)[0]


@pytest.fixture(scope="session")
def live_url(processes: Processes) -> str:
    return daphne_serve(processes, name="quickstart-daphne")


@pytest.fixture
def admin_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any) -> tuple[str, str]:
    """The login a first ``make run`` creates, from ``ensure_login`` as it runs there, and
    the file it keeps (in a directory of the test's own, not the checkout's)."""
    monkeypatch.delenv("AGENTSITE_ADMIN_USER", raising=False)
    monkeypatch.delenv("AGENTSITE_ADMIN_PASSWORD", raising=False)
    settings.LOCAL_DIR = tmp_path
    call_command("ensure_login", stdout=StringIO())
    username, password = (tmp_path / "login.txt").read_text().splitlines()
    return username, password


def run_block(block: str, live_url: str) -> str:
    assert ADDRESS in block, "the block names no address to point at the test's server"
    env = {
        key: value
        for key, value in subprocess_env().items()
        if not key.startswith("AGENTSITE_ADMIN_")
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.replace(ADDRESS, live_url)],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_readme_starts_with_the_two_commands_of_the_makefile() -> None:
    first = re.search(r"^```sh\n(.*?)^```$", README.read_text(), re.S | re.M)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["make run", "make test"]
    makefile = (BASE_DIR / "Makefile").read_text()
    assert re.search(r"^run: install\n\t\$\(PY\) manage.py serve$", makefile, re.M)
    assert re.search(r"^test: install\n\t\$\(PY\) -m pytest", makefile, re.M)


def test_the_browser_quickstart_logs_in_with_the_login_make_run_keeps(
    live_url: str, admin_login: tuple[str, str]
) -> None:
    text = section("browser")
    url = re.search(r"Open (http://\S+) and log in as `(\w+)`", text)
    assert url is not None
    assert url.group(2) == admin_login[0] == "admin"
    assert readme_block("browser").strip() == "cat .agentsite/login.txt"
    assert project_settings.LOCAL_DIR == BASE_DIR / ".agentsite"  # where login.txt is kept
    assert "second line of `.agentsite/login.txt`" in text

    browser = httpx.Client(follow_redirects=True, timeout=30)
    page = browser.get(url.group(1).replace(ADDRESS, live_url))
    login_url = str(page.url)
    assert login_url.startswith(f"{live_url}/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert csrf is not None
    home = browser.post(
        login_url,
        data={
            "csrfmiddlewaretoken": csrf.group(1),
            "username": admin_login[0],
            "password": admin_login[1],
        },
        headers={"Referer": login_url},
    )
    assert str(home.url) == f"{live_url}/"
    assert "logout" in home.text.lower()


def test_the_rest_quickstart_starts_the_tests_and_follows_them_to_their_summary(
    live_url: str, rq_workers: Processes, admin_login: tuple[str, str]
) -> None:
    block = readme_block("rest")
    shown = block.strip().splitlines()[-1]
    assert shown.startswith("# ")

    out = run_block(block, live_url).strip().splitlines()

    assert all(re.fullmatch(r"job_\S+ (queued|running|done)", line) for line in out[:-1])
    assert out[-2].endswith(" done")
    assert out[-1] == shown.removeprefix("# ")


def test_the_mcp_quickstart_lists_the_tools_and_calls_one(
    live_url: str, rq_workers: Processes, admin_login: tuple[str, str]
) -> None:
    out = run_block(readme_block("mcp"), live_url).strip().splitlines()

    tools = ast.literal_eval(out[0])  # the printed list of names
    assert {"run_tests", "crawl_site", "write_report", "read_file", "now"} <= set(tools)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", out[1])


def test_the_openai_quickstart_runs_the_tests_in_the_background(
    live_url: str, rq_workers: Processes, admin_login: tuple[str, str]
) -> None:
    block = readme_block("openai")
    shown = re.search(r"print\(response.output_text\)  # … (.+)$", block, re.M)
    assert shown is not None
    # As a fresh install asks (the suite's setting lets agents run tools at once).
    admin = get_user_model().objects.get(username=admin_login[0])
    ToolApprovalRule.objects.create(user=admin, tool="run_tests", mode="always")

    out = run_block(block, live_url)

    assert out.strip().endswith(shown.group(1))


def test_the_a2a_quickstart_streams_a_report_from_another_agent(
    live_url: str, rq_workers: Processes, admin_login: tuple[str, str]
) -> None:
    block = readme_block("a2a")
    shown = re.search(r"print\(answer\)  # (.+)$", block, re.M)
    assert shown is not None

    out = run_block(block, live_url)

    assert out.strip().splitlines()[-1] == shown.group(1)
