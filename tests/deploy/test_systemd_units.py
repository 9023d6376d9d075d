"""The shipped systemd units start real commands, each as the rest of agentsite starts it.

``make hosts`` starts its hosts' processes from these files (``tests/hosts/layout.py``);
this holds what needs neither root nor hosts.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import subprocess

import pytest
from django.conf import settings
from django.core.management import get_commands

from sessions.worker import TURN_WORKER_ARGS
from tests.deploy.units import INSTALL_PYTHON, INSTALL_ROOT, ROLES, UNITS_DIR, unit_read

ALL_UNITS = sorted(name for names in ROLES.values() for name in names)


def test_every_shipped_unit_belongs_to_a_host_role() -> None:
    assert sorted(path.name for path in UNITS_DIR.glob("*.service")) == ALL_UNITS


@pytest.mark.parametrize("name", ALL_UNITS)
def test_a_unit_runs_the_virtualenvs_python_with_the_shared_environment(name: str) -> None:
    unit = unit_read(name)
    assert set(unit.sections) == {"Unit", "Service", "Install"}
    assert unit.exec_start[0] == INSTALL_PYTHON
    assert unit.value("Service", "WorkingDirectory") == INSTALL_ROOT
    assert unit.value("Service", "EnvironmentFile") == "/etc/agentsite/agentsite.env"
    assert unit.value("Service", "User") == "agentsite"
    # Restarted after a crash or a deploy; an outage never ends the process.
    assert unit.value("Service", "Restart") == "always"
    assert unit.value("Service", "KillSignal") == "SIGTERM"
    assert unit.value("Service", "NoNewPrivileges") == "yes"
    assert unit.value("Service", "ProtectSystem") == "strict"
    assert unit.value("Install", "WantedBy") == "multi-user.target"


@pytest.mark.parametrize("name", ROLES["worker"])
def test_a_workers_command_is_one_of_manage_py(name: str) -> None:
    argv = unit_read(name).exec_start
    assert argv[1] == f"{INSTALL_ROOT}/manage.py"
    assert argv[2] in get_commands()


def test_the_tool_workers_and_turn_workers_take_their_queues_as_make_run_does() -> None:
    assert unit_read("agentsite-turns@.service").exec_start[2:] == list(TURN_WORKER_ARGS)
    tools = unit_read("agentsite-tools@.service").exec_start[2:]
    assert tools == ["rqworker", "tools", "default"]
    # The worker class the turn unit names is there.
    module, _, name = TURN_WORKER_ARGS[-1].rpartition(".")
    assert hasattr(importlib.import_module(module), name)


def test_the_web_unit_runs_daphne_on_the_asgi_application_behind_the_proxy() -> None:
    argv = unit_read("agentsite-web.service").exec_start
    assert argv[1:3] == ["-m", "daphne"]
    assert importlib.util.find_spec("daphne") is not None
    assert "--proxy-headers" in argv  # the client's address from nginx's X-Forwarded-For
    module, _, attribute = argv[-1].partition(":")
    assert (module, attribute) == ("agentsite.asgi", "application")
    assert importlib.util.find_spec(module) is not None


def test_the_turn_worker_is_given_longer_to_stop_than_its_turns_grace() -> None:
    stop_s = int(str(unit_read("agentsite-turns@.service").value("Service", "TimeoutStopSec")))
    assert stop_s > settings.AGENTSITE_TURN_STOP_GRACE_S + 5


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
@pytest.mark.parametrize("name", ALL_UNITS)
def test_systemd_finds_nothing_wrong_with_a_unit(name: str) -> None:
    # Without the install root and user here, only the file's own syntax is judged.
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(UNITS_DIR / name)],
        capture_output=True,
        text=True,
        check=False,
    )
    problems = [
        line
        for line in done.stderr.splitlines()
        if "Unknown" in line or "Invalid" in line or "Failed to parse" in line
    ]
    assert problems == [], done.stderr
