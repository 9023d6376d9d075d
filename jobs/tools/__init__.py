"""Built-in tools. Importing this package registers them."""

from jobs.tools import run_tests  # noqa: F401
