"""The import contracts (pyproject's ``[tool.importlinter]``) cover every module and can fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ("a2a_api", "accounts", "jobs", "responses", "sessions")


def contracts() -> dict[str, dict[str, list[str]]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["name"]: c for c in config["contracts"]}


def app_modules() -> set[str]:
    """Each app's direct submodules and subpackages (migrations aside)."""
    found = set()
    for app in APPS:
        for child in (ROOT / app).iterdir():
            name = child.name.removesuffix(".py")
            if name.startswith("__") or name == "migrations":
                continue
            if child.suffix == ".py" or (child / "__init__.py").exists():
                found.add(f"{app}.{name}")
    return found


def test_every_module_of_the_apps_is_domain_or_edge() -> None:
    domain = set(contracts()["The domain imports no HTTP module"]["source_modules"])
    edges = set(contracts()["The apps' edges never import the composition root"]["source_modules"])
    edges |= {"jobs.urls", "sessions.routing", "sessions.urls"}  # URL tables: list views
    assert not domain & edges
    assert app_modules() - domain - edges == set()


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contracts, to break on purpose."""
    for package in ("agentsite", *APPS):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("jobs/models.py", "import sessions.models", "jobs never imports sessions"),
        ("jobs/services.py", "import jobs.api", "The domain imports no HTTP module"),
        ("sessions/runs.py", "import ninja", "The domain imports no HTTP module"),
        ("agentsite/core/ids.py", "import jobs.models", "agentsite.core imports no app"),
        ("responses/services.py", "import a2a.types", "Only the A2A edge speaks A2A"),
        ("a2a_api/services.py", "import a2a_api.mapping", "The domain imports no HTTP module"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tree: Path, module: str, line: str, contract: str
) -> None:
    assert lint_imports(tree).returncode == 0, "the contracts hold on the tree as it is"
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert f"{contract}" in done.stdout and "BROKEN" in done.stdout
