"""The README is a guide into docs/, not the manual: it stays short."""

from __future__ import annotations

from tests.conftest import BASE_DIR

MAX_LINES = 250


def test_the_readme_fits_in_its_budget() -> None:
    lines = (BASE_DIR / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_LINES}): move reference to docs/"
    )
