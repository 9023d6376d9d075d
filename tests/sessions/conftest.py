"""Sessions test setup: the test tools are named in tests/environment.py."""
