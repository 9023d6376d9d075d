"""Built-in tools. Importing this package registers them."""

from jobs.tools import clock, crawl_site, files, http_get, run_tests, write_report  # noqa: F401
