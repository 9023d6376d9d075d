"""A blank Chromium page holding the chat's markdown renderer, as the chat page loads it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

SCRIPTS = ("vendor/markdown-it.min.js", "js/markdown.js")


@pytest.fixture
def renderer(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.set_content("<!doctype html><html><body><div id=out class='markdown'></div></body></html>")
    for script in SCRIPTS:
        page.add_script_tag(path=str(settings.BASE_DIR / "static" / script))
    yield page
    context.close()


def render_within(page: Any, source: str, timeout_s: float = 30) -> str:
    """Render ``source`` in the page; fail if the page has not returned within ``timeout_s``.

    The render runs on a timer and the wait is Playwright's, so a renderer stuck on
    the page's only thread fails the test at the timeout instead of hanging it.
    """
    page.evaluate(
        "(s) => { window.rendered = undefined; window.failed = undefined;"
        " setTimeout(() => { try { window.rendered = window.agentsiteMarkdown.render(s); }"
        " catch (e) { window.failed = String(e); } }, 0); }",
        source,
    )
    page.wait_for_function(
        "window.rendered !== undefined || window.failed !== undefined",
        timeout=timeout_s * 1000,
    )
    failed = page.evaluate("window.failed")
    assert failed is None, failed
    return str(page.evaluate("window.rendered"))
