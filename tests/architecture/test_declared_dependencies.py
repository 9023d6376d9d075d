"""Every third-party package the code imports is declared in pyproject.toml.

The apps (what runs in production) may import only ``[project] dependencies``;
tests and benchmarks may also import the ``dev`` extra. A package that only
arrives as another library's dependency can vanish with that library's next
release, and nothing bounds its version.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
APPS = ("a2a_api", "accounts", "agentsite", "jobs", "responses", "sessions")
FIRST_PARTY = {*APPS, "tests", "bench", "manage"}
# Run in a virtual environment of its own, with its own requirements.
OWN_ENVIRONMENT = {Path("tests/responses/maf_client.py"), Path("bench/_langgraph_chat.py")}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return normalized(match.group(0))


def declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {requirement_name(r) for r in project["dependencies"]}
    dev = {requirement_name(r) for r in project["optional-dependencies"]["dev"]}
    return runtime, runtime | dev


def top_level_imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def local_modules(folder: Path) -> set[str]:
    """Modules a script imports from its own folder (bench/'s helpers)."""
    return {p.stem for p in folder.glob("*.py")} | {
        p.name for p in folder.iterdir() if (p / "__init__.py").exists()
    }


@functools.cache
def installed() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


@functools.cache
def providers(package: str) -> frozenset[str]:
    """The distributions that ship ``package`` itself, not only a plugin folder inside it."""
    candidates = installed().get(package, [])
    owners = set()
    for name in candidates:
        files = importlib.metadata.distribution(name).files or []
        if any(
            str(f) in (f"{package}/__init__.py", f"{package}.py")
            or (str(f).startswith(f"{package}.") and str(f).endswith((".so", ".pyd")))
            for f in files
        ):
            owners.add(normalized(name))
    return frozenset(owners or {normalized(name) for name in candidates})


def undeclared(folders: tuple[str, ...], allowed: set[str]) -> list[str]:
    found = []
    stdlib = set(sys.stdlib_module_names)
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative in OWN_ENVIRONMENT or "migrations" in relative.parts:
                continue
            local = local_modules(path.parent)
            for line, package in top_level_imports(path):
                if package in stdlib or package in FIRST_PARTY or package in local:
                    continue
                owners = providers(package)
                if not owners & allowed:
                    found.append(f"{relative}:{line} imports {package} ({sorted(owners)})")
    return found


def test_the_apps_import_only_declared_dependencies() -> None:
    runtime, _ = declared()
    assert undeclared(APPS, runtime) == []


def test_tests_and_benchmarks_import_only_declared_dependencies() -> None:
    _, with_dev = declared()
    assert undeclared(("tests", "bench"), with_dev) == []


def test_an_undeclared_import_is_found(tmp_path: Path) -> None:
    """The check sees through a package that other distributions add plugins to."""
    assert providers("twisted") == {"twisted"}
    runtime, _ = declared()
    assert "twisted" in runtime
    module = tmp_path / "module.py"
    module.write_text("from twisted.internet import tcp\nimport autobahn.websocket\n")
    assert [package for _, package in top_level_imports(module)] == ["twisted", "autobahn"]


def locked() -> dict[str, Version]:
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", LOCK.read_text(), re.MULTILINE)
    return {normalized(name): Version(version) for name, version in pins}


def test_the_lock_pins_every_declared_dependency_within_its_range() -> None:
    """pyproject.toml edited without ``make lock`` fails here, not on a fresh clone."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = locked()
    outside = []
    for text in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        requirement = Requirement(text)
        name = normalized(requirement.name)
        if name not in pins or pins[name] not in requirement.specifier:
            outside.append(f"{text}: locked {pins.get(name)}")
    assert outside == []


def test_the_lock_pins_what_is_installed() -> None:
    """The environment the suite runs in is the locked one (``make install``)."""
    pins = locked()
    differ = []
    for dist in importlib.metadata.distributions():
        name = normalized(dist.metadata["Name"])
        if name in pins and Version(dist.version) != pins[name]:
            differ.append(f"{name}: installed {dist.version}, locked {pins[name]}")
    assert differ == []
