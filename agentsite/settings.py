"""agentsite settings, driven by the environment.

Every value has a default that works on a fresh machine (SQLite, embedded Redis,
the offline model). Values that cannot be parsed do not raise here: they are
recorded in ``CONFIG_ERRORS`` and reported by the system checks in
``agentsite.ops.checks`` with an id, so a typo surfaces as a clear message.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from csp.constants import NONE, SELF

from agentsite.core.database_url import database_url_parse
from agentsite.core.private_files import (
    private_dir,
    private_file_create,
    private_file_read,
    sqlite_file_private,
)
from agentsite.core.redis_connections import channel_layer_host, rq_connection, sentinels_parse

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_DIR = BASE_DIR / ".agentsite"

CONFIG_ERRORS: list[tuple[str, str]] = []


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    CONFIG_ERRORS.append((name, f"{name}={raw!r} is not a boolean (use true or false)."))
    return default


def env_int(name: str, default: int, *, least: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        CONFIG_ERRORS.append((name, f"{name}={raw!r} is not an integer."))
        return default
    if least is not None and value < least:
        CONFIG_ERRORS.append((name, f"{name}={raw!r} is below {least}."))
        return default
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        CONFIG_ERRORS.append((name, f"{name}={raw!r} is not a number."))
        return default


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...], *, invalid: str) -> str:
    """One of ``choices`` (case and surrounding blanks ignored); ``invalid``, the safest
    choice, with a configuration error for anything else."""
    value = env_str(name, default).strip().lower()
    if value in choices:
        return value
    CONFIG_ERRORS.append((name, f"{name}={value!r} is not one of {', '.join(choices)}."))
    return invalid


def local_secret_key() -> str:
    """A development key generated once and kept in a git-ignored file only its owner reads."""
    path = private_dir(LOCAL_DIR) / "secret_key"
    private_file_create(path, secrets.token_urlsafe(50))  # another process may have won
    return private_file_read(path).strip()


SECRET_KEY = env_str("SECRET_KEY") or local_secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Served over HTTPS only (production, typically behind a proxy that ends TLS and sets
# X-Forwarded-Proto): HTTP is redirected (but /healthz and /metrics, which probes
# read over plain HTTP), cookies are sent over HTTPS only, HSTS for a year. Each
# setting may also be given on its own.
AGENTSITE_HTTPS = env_bool("AGENTSITE_HTTPS", False)
if env_bool("AGENTSITE_BEHIND_TLS_PROXY", AGENTSITE_HTTPS):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", AGENTSITE_HTTPS)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", AGENTSITE_HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", AGENTSITE_HTTPS)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if AGENTSITE_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)

# The pages' Content-Security-Policy (django-csp): scripts, styles and connections
# from the site itself only. The chat renders a model's text as Markdown; should
# anything slip past the renderer, no injected script runs, nothing loads from
# elsewhere and the page cannot be framed. 'self' covers the same origin's
# ws:/wss: (CSP Level 3), which the chat's websocket uses. The django-rq dashboard
# (staff only) has inline scripts of its own and goes without.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/django-rq/"],
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_rq",
    "django_prometheus",
    "agentsite.apps.AgentsiteConfig",
    "accounts.apps.AccountsConfig",
    "sessions.apps.SessionsConfig",
    "jobs.apps.JobsConfig",
    "responses.apps.ResponsesConfig",
    "a2a_api.apps.A2AConfig",
]

MIDDLEWARE = [
    # Request counts and latencies of this web process (django-prometheus), for /metrics.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every answer (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    "agentsite.web.error_pages.ApiMethodNotAllowedAsJson",
    "agentsite.web.error_pages.ApiErrorsAsJson",
    "agentsite.web.middleware.SyncChainMiddleware",
]

ROOT_URLCONF = "agentsite.urls"
ASGI_APPLICATION = "agentsite.asgi.application"

# django-ninja's and daphne's packages are not installed apps: a worker process
# (django.setup() plus its RQ entry point) then never imports the HTTP layer.
# The API docs page still renders from ninja's own templates and static files.
NINJA_DIR = Path(importlib.util.find_spec("ninja").origin).parent  # type: ignore[arg-type,union-attr]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates", NINJA_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -----------------------------------------------------------------

DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
SQLITE_OPTIONS = {
    # IMMEDIATE takes the write lock when a transaction starts, so two writers
    # queue on the busy timeout instead of failing to upgrade a read lock.
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=30000",
}
try:
    _database = database_url_parse(DATABASE_URL, conn_max_age=0)
except Exception as exc:
    CONFIG_ERRORS.append(("DATABASE_URL", f"DATABASE_URL could not be parsed: {exc}"))
    _database = database_url_parse(f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
# Name of the test database, so that several test runs can share a machine.
TEST_DB_NAME = env_str("AGENTSITE_TEST_DB", "test")
if _database["ENGINE"] == "django.db.backends.sqlite3":
    _database["OPTIONS"] = {**SQLITE_OPTIONS, **_database.get("OPTIONS", {})}
    _sqlite_file = Path(str(_database["NAME"] or ":memory:"))
    if str(_sqlite_file) != ":memory:" and _sqlite_file.parent.is_dir():
        try:
            sqlite_file_private(_sqlite_file)  # 0600 before SQLite would make it 0644
        except OSError:  # a read-only directory: SQLite will say so when it opens the file
            pass
    # Tests run workers in other processes, so the test database must be a file.
    _database["TEST"] = {"NAME": str(LOCAL_DIR / f"{TEST_DB_NAME}.sqlite3")}
else:
    if TEST_DB_NAME != "test":
        _database["TEST"] = {"NAME": f"test_{TEST_DB_NAME}"}
    # Parameters travel apart from the statement (psycopg's own binding, not Django's
    # default of quoting them into the statement's text in Python), and a statement a
    # connection has run AGENTSITE_DB_PREPARE_THRESHOLD times is prepared on the
    # server, which then parses and plans it once: a quarter less of the server's CPU
    # a turn (docs/benchmarks.md, "What one turn costs"). A pooler in transaction mode
    # that cannot keep prepared statements wants AGENTSITE_DB_PREPARE_THRESHOLD=off.
    _prepare = env_str("AGENTSITE_DB_PREPARE_THRESHOLD", "5").lower()
    if _prepare != "off" and not _prepare.isdigit():
        CONFIG_ERRORS.append(
            (
                "AGENTSITE_DB_PREPARE_THRESHOLD",
                "AGENTSITE_DB_PREPARE_THRESHOLD must be a whole number of executions or 'off'.",
            )
        )
        _prepare = "off"
    _database["OPTIONS"] = {
        **_database.get("OPTIONS", {}),
        "server_side_binding": env_bool("AGENTSITE_DB_SERVER_SIDE_BINDING", True),
        "prepare_threshold": None if _prepare == "off" else int(_prepare),
    }
    # The web process runs each concurrent request's database work in a thread
    # of its own: without a bound, a burst of requests opens a connection each
    # and runs PostgreSQL out of them ("too many clients"). agentsite/asgi.py
    # turns the pool on for that process; workers bound their connections
    # themselves (one per work horse, AGENTSITE_TURN_DB_THREADS per turn
    # worker) and fork, which a pool's background threads do not survive.
    if env_bool("AGENTSITE_DB_POOL", False):
        _database["OPTIONS"] = {
            **_database.get("OPTIONS", {}),
            "pool": {
                "min_size": 1,
                "max_size": env_int("AGENTSITE_DB_POOL_MAX", 16),
                # A request waits this long for a connection, then fails as unavailable.
                "timeout": env_float("AGENTSITE_DB_POOL_TIMEOUT_S", 10.0),
            },
        }
DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis, queues, channels ------------------------------------------------------

# One Redis server by URL, or (REDIS_SENTINELS) a primary found through Redis Sentinel,
# which every client then asks for (agentsite.core.redis_connections). With
# sentinels, REDIS_URL stays unset: the data nodes' password and database number
# are REDIS_PASSWORD and REDIS_DB.
REDIS_SENTINELS, _sentinels_error = sentinels_parse(env_str("REDIS_SENTINELS"))
if _sentinels_error:
    CONFIG_ERRORS.append(("REDIS_SENTINELS", f"REDIS_SENTINELS: {_sentinels_error}."))
REDIS_SENTINEL_MASTER = env_str("REDIS_SENTINEL_MASTER").strip()
REDIS_SENTINEL_PASSWORD = env_str("REDIS_SENTINEL_PASSWORD")
REDIS_PASSWORD = env_str("REDIS_PASSWORD")
REDIS_DB = env_int("REDIS_DB", 0, least=0)
REDIS_URL = env_str("REDIS_URL") or ("" if REDIS_SENTINELS else "redis://127.0.0.1:6379/0")
if REDIS_URL and urlparse(REDIS_URL).scheme not in {"redis", "rediss", "unix"}:
    CONFIG_ERRORS.append(("REDIS_URL", f"REDIS_URL={REDIS_URL!r} is not a redis:// URL."))
    REDIS_URL = "redis://127.0.0.1:6379/0"
_redis_target: dict[str, Any] = {
    "url": REDIS_URL,
    "sentinels": REDIS_SENTINELS,
    "master": REDIS_SENTINEL_MASTER,
    "sentinel_password": REDIS_SENTINEL_PASSWORD,
    "password": REDIS_PASSWORD,
    "db": REDIS_DB,
}
# Prefix for every Redis key and channel-layer group this deployment uses, so
# two deployments (or a test run) can share one Redis server.
REDIS_PREFIX = env_str("AGENTSITE_REDIS_PREFIX", "agentsite")

RQ_QUEUES = {
    "default": {**rq_connection(**_redis_target), "DEFAULT_TIMEOUT": 600},
    "turns": {**rq_connection(**_redis_target), "DEFAULT_TIMEOUT": 600},
    "tools": {**rq_connection(**_redis_target), "DEFAULT_TIMEOUT": 3600},
}
RQ_SHOW_ADMIN_LINK = True
# Records tool jobs' starts and ends from the worker's own connection (see jobs/worker.py).
RQ = {"WORKER_CLASS": "jobs.worker.JobWorker"}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [channel_layer_host(**_redis_target)],
            "prefix": f"{REDIS_PREFIX}-ws",
        },
    }
}

# --- agentsite ------------------------------------------------------------------

AGENTSITE_MODEL = env_str("AGENTSITE_MODEL", "offline")
# The models a session or a response may name (fnmatch patterns such as claude-*); a
# session that names none gets AGENTSITE_MODEL. The default: the offline model and
# AGENTSITE_MODEL, so that nobody spends the operator's key on a model they did not offer.
AGENTSITE_ALLOWED_MODELS = env_list(
    "AGENTSITE_ALLOWED_MODELS", list(dict.fromkeys(["offline", AGENTSITE_MODEL]))
)
# The scripted model records every request it gets in Redis: for test suites only.
AGENTSITE_SCRIPTED_MODEL = env_bool("AGENTSITE_SCRIPTED_MODEL", False)
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")
AGENTSITE_WORKSPACE = Path(env_str("AGENTSITE_WORKSPACE") or BASE_DIR / "workspace").resolve()
# How long an Idempotency-Key stays bound to its first request.
AGENTSITE_IDEMPOTENCY_TTL_S = env_int("AGENTSITE_IDEMPOTENCY_TTL_S", 24 * 3600)
# Callback and crawl addresses that may resolve to private or loopback ranges.
AGENTSITE_ALLOWED_PRIVATE_HOSTS = env_list("AGENTSITE_ALLOWED_PRIVATE_HOSTS", [])
# Offline model latency simulation: seconds per call, per input and output token.
AGENTSITE_OFFLINE_LATENCY = (
    env_float("AGENTSITE_OFFLINE_CALL_S", 0.0),
    env_float("AGENTSITE_OFFLINE_INPUT_TOKEN_S", 0.0),
    env_float("AGENTSITE_OFFLINE_OUTPUT_TOKEN_S", 0.0),
)
# Approximate token budget for the conversation the model is shown.
AGENTSITE_CONTEXT_BUDGET_TOKENS = env_int("AGENTSITE_CONTEXT_BUDGET_TOKENS", 60_000)
# A running model turn whose worker has not beaten for this long is failed as lost.
AGENTSITE_RUN_STALE_S = env_float("AGENTSITE_RUN_STALE_S", 15.0)
# A turn worker (sessions.worker.TurnWorker) runs up to this many turns at once on
# one event loop; their queries share DB_THREADS threads (one connection each)
# and their blocking tools TOOL_THREADS threads. A turn waiting for its model costs
# a coroutine and a socket: at 100, a box of 200 users (a turn of 4 s every 8 s)
# filled the slots and its turns queued behind them (docs/benchmarks.md).
AGENTSITE_TURN_CONCURRENCY = env_int("AGENTSITE_TURN_CONCURRENCY", 400)
# SQLite has one writer: more threads in one process only wait on its lock, and its
# busy handler sleeps in coarse steps, so on SQLite one thread carries them
# (docs/benchmarks.md); PostgreSQL gets a pool.
AGENTSITE_TURN_DB_THREADS = env_int(
    "AGENTSITE_TURN_DB_THREADS", 1 if _database["ENGINE"].endswith("sqlite3") else 8
)
AGENTSITE_TURN_TOOL_THREADS = env_int("AGENTSITE_TURN_TOOL_THREADS", 8)
# The assistant_delta rows a turn worker writes a second across all the answers it
# streams: with few answers each writes every 0.05 s, with many each less often, at
# least every 0.25 s (sessions.loop.TextStreams).
AGENTSITE_DELTA_WRITES_PER_S = env_int("AGENTSITE_DELTA_WRITES_PER_S", 100)
# Threads of a web process that run blocking tools called over MCP: a pool of
# their own, so that a flood of slow calls waits there and never holds up requests.
AGENTSITE_BLOCKING_TOOL_THREADS = env_int("AGENTSITE_BLOCKING_TOOL_THREADS", 4)


# Thresholds of the cyclic garbage collector in web processes (agentsite.core.heap):
# three integers, as gc.set_threshold takes them. CPython's own are 700,10,10.
def env_gc_thresholds(name: str, default: tuple[int, int, int]) -> tuple[int, int, int]:
    raw = env_list(name, [str(n) for n in default])
    if len(raw) != 3 or not all(n.isdigit() and int(n) > 0 for n in raw):
        CONFIG_ERRORS.append((name, f"{name}={','.join(raw)!r} is not three positive integers."))
        return default
    return int(raw[0]), int(raw[1]), int(raw[2])


AGENTSITE_GC_THRESHOLDS = env_gc_thresholds("AGENTSITE_GC_THRESHOLDS", (50_000, 20, 10))
# Threads of a web process that run its requests to synchronous views (middleware, view
# and all), each keeping its database connection between requests (agentsite.web.handler);
# 0: Django's own handler, a thread and a connection of its own for each request.
AGENTSITE_REQUEST_THREADS = env_int("AGENTSITE_REQUEST_THREADS", 16, least=0)
# Threads of a web process that read session logs for its streams, each keeping a connection.
AGENTSITE_STREAM_READ_THREADS = env_int("AGENTSITE_STREAM_READ_THREADS", 4)
# On SIGTERM a turn worker lets running turns finish for this long, then hands
# the rest back to the queue for another worker.
AGENTSITE_TURN_STOP_GRACE_S = env_float("AGENTSITE_TURN_STOP_GRACE_S", 10.0)
# At most this many inbox events per run (0: all pending events, the normal router).
AGENTSITE_MAX_BATCH = env_int("AGENTSITE_MAX_BATCH", 0)
# Jobs: a cancelled or overdue tool that does not stop by itself is stopped this
# many seconds later; a running job whose heartbeat is older than STALE is lost.
AGENTSITE_JOB_STOP_GRACE_S = env_float("AGENTSITE_JOB_STOP_GRACE_S", 5.0)
AGENTSITE_JOB_HEARTBEAT_S = env_float("AGENTSITE_JOB_HEARTBEAT_S", 1.0)
AGENTSITE_JOB_HEARTBEAT_STALE_S = env_float("AGENTSITE_JOB_HEARTBEAT_STALE_S", 10.0)
# A tool worker runs its tool jobs one after another in one work horse (jobs/horse.py),
# forked afresh after this many jobs (1: a fresh horse for every job, as plain RQ),
# or sooner when a job left a thread running, changed directory or grew the horse
# past MAX_RSS_MB.
AGENTSITE_JOB_HORSE_MAX_JOBS = env_int("AGENTSITE_JOB_HORSE_MAX_JOBS", 500, least=1)
AGENTSITE_JOB_HORSE_MAX_RSS_MB = env_int("AGENTSITE_JOB_HORSE_MAX_RSS_MB", 1024, least=64)
# Seconds between the scheduler's job sweeps (lost workers, deadlines, webhook retries).
AGENTSITE_JOB_SWEEP_S = env_int("AGENTSITE_JOB_SWEEP_S", 2)
# Retention: finished jobs (with their partial results, events and webhook
# deliveries) and sessions their owner deleted (with their events, runs and
# responses) are deleted this many days after they ended or were deleted (0: kept
# forever). The scheduler deletes them every RETENTION_SWEEP_S seconds, at most
# RETENTION_BATCHES statements of RETENTION_BATCH rows each per pass.
AGENTSITE_JOB_RETENTION_DAYS = env_int("AGENTSITE_JOB_RETENTION_DAYS", 30, least=0)
AGENTSITE_SESSION_RETENTION_DAYS = env_int("AGENTSITE_SESSION_RETENTION_DAYS", 30, least=0)
AGENTSITE_RETENTION_SWEEP_S = env_int("AGENTSITE_RETENTION_SWEEP_S", 60, least=1)
AGENTSITE_RETENTION_BATCH = env_int("AGENTSITE_RETENTION_BATCH", 500, least=1)
AGENTSITE_RETENTION_BATCHES = env_int("AGENTSITE_RETENTION_BATCHES", 20, least=1)
# How many tool jobs may be handed to RQ at once (jobs/dispatch.py): one per tool
# worker. 0 counts the workers Redis lists on `tools`.
AGENTSITE_JOB_SLOTS = env_int("AGENTSITE_JOB_SLOTS", 0)
# Delays before each webhook retry; the delivery is given up after the last one.
try:
    AGENTSITE_WEBHOOK_RETRY_S = [
        float(x) for x in env_list("AGENTSITE_WEBHOOK_RETRY_S", ["5", "30", "120", "600", "1800"])
    ]
except ValueError:
    CONFIG_ERRORS.append(
        ("AGENTSITE_WEBHOOK_RETRY_S", "AGENTSITE_WEBHOOK_RETRY_S must list numbers of seconds.")
    )
    AGENTSITE_WEBHOOK_RETRY_S = [5.0, 30.0, 120.0, 600.0, 1800.0]
AGENTSITE_WEBHOOK_TIMEOUT_S = env_float("AGENTSITE_WEBHOOK_TIMEOUT_S", 10.0)
# Pause between write_report's sections (so progress is visible; 0 in a hurry).
AGENTSITE_REPORT_SECTION_DELAY_S = env_float("AGENTSITE_REPORT_SECTION_DELAY_S", 0.5)
# The Python that run_tests runs pytest with (the workspace's own virtualenv, say).
AGENTSITE_WORKSPACE_PYTHON = env_str("AGENTSITE_WORKSPACE_PYTHON") or sys.executable
# Where run_tests runs pytest (jobs/tools/sandbox.py): "auto" in namespaces that hide
# the server's secrets where this machine can make them and with a scrubbed
# environment only where it cannot; "required" fails the job instead; "off" never tries.
AGENTSITE_RUN_TESTS_SANDBOX = env_choice(
    "AGENTSITE_RUN_TESTS_SANDBOX", "auto", ("auto", "required", "off"), invalid="required"
)
# More files and directories the sandbox covers (comma-separated absolute paths).
AGENTSITE_RUN_TESTS_HIDDEN_PATHS = env_list("AGENTSITE_RUN_TESTS_HIDDEN_PATHS", [])
# What the sandboxed tests may write in the workspace: "copy" (a scratch copy of it,
# thrown away after the run), "read-only" (nothing), "writable" (the workspace itself).
AGENTSITE_RUN_TESTS_WORKSPACE = env_choice(
    "AGENTSITE_RUN_TESTS_WORKSPACE", "copy", ("copy", "read-only", "writable"), invalid="read-only"
)
# The unprivileged user (and group) the sandboxed tests run as when the server is root.
AGENTSITE_RUN_TESTS_UID = env_int("AGENTSITE_RUN_TESTS_UID", 65534, least=1)
AGENTSITE_RUN_TESTS_GID = env_int("AGENTSITE_RUN_TESTS_GID", 65534, least=1)
# Seconds between keep-alive comments on server-sent event streams.
AGENTSITE_SSE_HEARTBEAT_S = env_float("AGENTSITE_SSE_HEARTBEAT_S", 15.0)
# Seconds without traffic after which a websocket re-reads its session's log and
# re-checks the credential it was opened with.
AGENTSITE_WS_IDLE_CHECK_S = env_float("AGENTSITE_WS_IDLE_CHECK_S", 30.0)
# Bytes a websocket or event stream may have written and not yet taken by its client:
# past it the stream waits for the client to read. One that has not read for
# AGENTSITE_STREAM_STALL_S seconds is cut off (a websocket closed with 4429, an event
# stream's connection dropped); it resumes from its last token.
AGENTSITE_STREAM_SEND_BUFFER_MAX = env_int(
    "AGENTSITE_STREAM_SEND_BUFFER_MAX", 4 << 20, least=1 << 16
)
AGENTSITE_STREAM_STALL_S = env_float("AGENTSITE_STREAM_STALL_S", 30.0)
if AGENTSITE_STREAM_STALL_S <= 0:
    CONFIG_ERRORS.append(
        (
            "AGENTSITE_STREAM_STALL_S",
            "AGENTSITE_STREAM_STALL_S must be a positive number of seconds.",
        )
    )
    AGENTSITE_STREAM_STALL_S = 30.0
# Extra modules that register tools (comma-separated dotted paths), imported by
# every process together with the built-in tools.
AGENTSITE_EXTRA_TOOLS = env_list("AGENTSITE_EXTRA_TOOLS", [])


def env_tool_approvals(name: str) -> dict[str, str]:
    """``tool=mode`` pairs, comma-separated; a mode is ``never`` or ``always``."""
    modes: dict[str, str] = {}
    for item in env_list(name, []):
        tool, _, mode = item.partition("=")
        tool, mode = tool.strip(), mode.strip().lower()
        if not tool or mode not in ("never", "always"):
            CONFIG_ERRORS.append((name, f"{name}: {item!r} is not tool=never or tool=always."))
            continue
        modes[tool] = mode
    return modes


# --- approvals ------------------------------------------------------------------------
# Which tools an agent may call only once its user approved the call, overriding each
# tool's own default (run_tests, crawl_site, http_get ask); the admin's "Tool approval
# rules" override this per user. A session's owner may allow a tool for the rest of a
# session only where no operator said "always".
AGENTSITE_TOOL_APPROVALS = env_tool_approvals("AGENTSITE_TOOL_APPROVALS")
# How long a request for approval (or a question) waits before it expires.
AGENTSITE_APPROVAL_TTL_S = env_int("AGENTSITE_APPROVAL_TTL_S", 24 * 3600, least=1)

# --- quotas ---------------------------------------------------------------------------
# Each user's limits (0: no limit); the admin's "User quotas" override them per user.
# Live jobs and live turns are those queued or running; a message that would start a
# turn is refused at the turn limit (one joining a session's queued turn is not).
AGENTSITE_QUOTA_LIVE_JOBS = env_int("AGENTSITE_QUOTA_LIVE_JOBS", 100)
AGENTSITE_QUOTA_LIVE_TURNS = env_int("AGENTSITE_QUOTA_LIVE_TURNS", 50)
AGENTSITE_QUOTA_MESSAGES_PER_MINUTE = env_int("AGENTSITE_QUOTA_MESSAGES_PER_MINUTE", 120)
# Requests for approval and questions waiting for one user's answer at once.
AGENTSITE_QUOTA_PENDING_APPROVALS = env_int("AGENTSITE_QUOTA_PENDING_APPROVALS", 100)
# MCP sessions (2025-11-25 handshakes) one user may hold open in one web process, and
# how long one may sit idle before it is closed; the process holds at most MAX_SESSIONS.
AGENTSITE_QUOTA_MCP_SESSIONS = env_int("AGENTSITE_QUOTA_MCP_SESSIONS", 100)
AGENTSITE_QUOTA_MCP_IDLE_S = env_float("AGENTSITE_QUOTA_MCP_IDLE_S", 300.0)
AGENTSITE_MCP_MAX_SESSIONS = env_int("AGENTSITE_MCP_MAX_SESSIONS", 10_000)

# --- auth, static, i18n --------------------------------------------------------------

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static", NINJA_DIR / "static"]
STATIC_ROOT = BASE_DIR / ".agentsite" / "static"

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("AGENTSITE_MAX_BODY_BYTES", 1024 * 1024)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Lines about one job, run or session name it: "... jobs.runner [job_id=job_…]: ...".
    "filters": {"log_context": {"()": "agentsite.core.logcontext.LogContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s%(log_context)s: %(message)s"}
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["log_context"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
