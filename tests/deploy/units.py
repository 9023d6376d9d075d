"""The systemd units of ``deploy/systemd/``, read as systemd reads the parts used here.

``make hosts`` starts every process of its hosts from these files (their
``ExecStart`` and ``Environment``), so the recipe is what is tested;
``tests/deploy/test_systemd_units.py`` holds what needs no hosts.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import BASE_DIR

UNITS_DIR = BASE_DIR / "deploy" / "systemd"
# Where the units expect the checkout, and its virtualenv's interpreter.
INSTALL_ROOT = "/srv/agentsite"
INSTALL_PYTHON = f"{INSTALL_ROOT}/.venv/bin/python"
# What each kind of host runs.
ROLES = {
    "web": ("agentsite-web.service",),
    "worker": (
        "agentsite-tools@.service",
        "agentsite-turns@.service",
        "agentsite-scheduler.service",
    ),
}


@dataclass
class Unit:
    name: str
    # section → (key, value) in file order; a key may repeat (Environment=).
    sections: dict[str, list[tuple[str, str]]]

    def values(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def value(self, section: str, key: str) -> str | None:
        found = self.values(section, key)
        return found[-1] if found else None

    @property
    def exec_start(self) -> list[str]:
        (line,) = self.values("Service", "ExecStart")
        return shlex.split(line)

    @property
    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for line in self.values("Service", "Environment"):
            for assignment in shlex.split(line):
                key, _, value = assignment.partition("=")
                env[key] = value
        return env

    def argv_at(self, root: Path, python: str) -> list[str]:
        """``ExecStart`` for a checkout at ``root`` run by ``python``."""
        argv = self.exec_start
        if argv[0] == INSTALL_PYTHON:
            argv[0] = python
        return [arg.replace(INSTALL_ROOT, str(root)) for arg in argv]


def unit_read(name: str) -> Unit:
    """``deploy/systemd/<name>``; comments, blank lines, continued lines as systemd reads them."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    pending = ""
    for raw in (UNITS_DIR / name).read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        if current is None or "=" not in line:
            raise ValueError(f"{name}: not a unit file line: {raw!r}")
        key, _, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return Unit(name=name, sections=sections)
