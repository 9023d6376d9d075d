"""The admin's job list fits a 1280-pixel-wide window: no column is cut off."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Job
from tests.browser.conftest import login_context

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 1280, 800


def some_jobs(owner: Any) -> None:
    now = timezone.now()
    for i, (tool, status) in enumerate(
        [
            ("run_tests", Job.Status.DONE),
            ("write_report", Job.Status.RUNNING),
            ("crawl_site", Job.Status.FAILED),
            ("write_report", Job.Status.QUEUED),
            ("run_tests", Job.Status.TIMED_OUT),
        ]
    ):
        Job.objects.create(
            owner=owner,
            tool=tool,
            args={},
            status=status,
            timeout_s=60,
            progress_fraction=0.4,
            progress_message="writing Test results",
            finished_at=now - timedelta(minutes=i) if status in Job.TERMINAL else None,
        )


def test_every_column_of_the_job_list_is_inside_a_1280_pixel_window(
    browser: Any, site: str, make_user: Any
) -> None:
    staff = make_user("operator-with-a-long-name", is_staff=True, is_superuser=True)
    some_jobs(staff)
    context = login_context(browser, site, staff)
    try:
        page = context.new_page()
        page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
        page.goto(f"{site}/admin/jobs/job/")
        page.locator("#result_list tbody tr").nth(4).wait_for()
        header = page.locator("#result_list thead th").last
        cells = page.locator("#result_list tbody tr td:last-child")
        assert cells.count() == 5
        for box in [header.bounding_box(), *(c.bounding_box() for c in cells.all())]:
            assert box is not None
            assert box["x"] + box["width"] <= WIDTH, box
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    finally:
        context.close()
