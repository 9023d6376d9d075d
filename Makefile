# Two commands: `make run` and `make test`. Both install everything first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

LOCK := requirements.lock

.PHONY: run test fuzz a2a-tck chaos hosts bench install lock lint migrations-check clean

# Exactly the versions of requirements.lock, each checked against its hashes; then
# agentsite itself, with no dependency of its own resolved afresh, built by the
# lock's setuptools (no isolated build environment fetching a backend of its own).
$(STAMP): $(LOCK) pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("agentsite needs Python 3.11+") if sys.version_info < (3, 11) else None'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	touch $(STAMP)

install: $(STAMP)

# Re-resolves pyproject.toml's ranges into requirements.lock, keeping the pins that
# still fit (LOCK_ARGS=--upgrade, or --upgrade-package NAME, to move them), with the
# build backend of [build-system] that install builds agentsite with. Not after
# install: with a dependency the lock lacks yet, install's pip check fails.
lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(VENV)/bin/pip-compile || $(PY) -m pip install --quiet pip-tools
	$(VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --extra dev --strip-extras \
		--build-deps-for=editable --no-emit-index-url --no-emit-find-links $(LOCK_ARGS) \
		-o $(LOCK) pyproject.toml

run: install
	$(PY) manage.py serve

# pytest-xdist workers, each on its own Redis database and test database
# (tests/environment.py); TEST_WORKERS=0 runs the suite in one process. Three on
# SQLite, on two cores: the tests spend much of their time waiting on the servers and
# workers they start, and even three keep two cores only about three-quarters busy.
# Two on PostgreSQL: three workers' servers and worker processes open more connections
# than its default max_connections (100).
ifneq (,$(findstring postgres,$(DATABASE_URL)))
TEST_WORKERS ?= 2
else
TEST_WORKERS ?= 3
endif
test: install
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The REST API against its own OpenAPI document: schemathesis, a fixed seed, a few minutes.
fuzz: install
	$(PY) -m pytest tests/fuzz -m fuzz -s $(PYTEST_ARGS)

# The official A2A compatibility kit (vendor/a2a-tck) against a live agentsite, both
# bindings, in a virtualenv of its own (.venv-tck) from tests/a2a/tck/requirements.txt.
a2a-tck: install
	$(PY) -m pytest -m conformance tests/a2a/test_compatibility_kit.py $(PYTEST_ARGS)

# The scale-out layout under faults, on a PostgreSQL and a Redis of its own (tests/chaos/).
chaos: install
	$(PY) -m pytest -p tests.chaos.environment -s tests/chaos/suite.py $(PYTEST_ARGS)

# The production layout on hosts of its own: network namespaces on a private bridge,
# nginx in front of two web hosts, Redis Sentinel (tests/hosts/; root only).
hosts: install
	$(PY) -m pytest -p tests.hosts.environment -s tests/hosts/suite.py $(PYTEST_ARGS)

bench: install
	$(PY) -m bench.run

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) manage.py makemigrations --check --dry-run

clean:
	rm -rf $(VENV) .venv-tck .agentsite db.sqlite3* tests/a2a/js/node_modules
