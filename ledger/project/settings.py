"""Wake Ledger settings, read from environment variables (see docs/configuration.md)."""

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from ledger.domain import policy as domain_policy
from ledger.project import dispatchers, oauth
from ledger.project.env import database_from_url, env_bool, env_int, env_list, env_networks, env_str
from ledger.project.files import private_var
from ledger.project.logconfig import logging_from_environment

# The checkout (this file is ledger/project/settings.py).
BASE_DIR = Path(__file__).resolve().parents[2]
VAR_DIR = Path(env_str("WAKELEDGER_VAR_DIR", str(BASE_DIR / "var")))
# var/ holds the SQLite ledger (admin sessions included), its WAL, the secret
# key and the runs' logs: nobody but the service's user reads them.
private_var(VAR_DIR, None if env_str("DATABASE_URL") else VAR_DIR / "ledger.sqlite3")


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once into var/.

    The file is created with O_EXCL so two processes starting together (web and
    qcluster under `make run`) cannot each write a different key.
    """
    from_env = env_str("SECRET_KEY")
    if from_env:
        return from_env
    if env_str("DATABASE_URL"):
        # Several processes on several hosts share one PostgreSQL database; API
        # tokens are keyed with SECRET_KEY, so one generated per var/ would make
        # the same token valid on one process and 401 on the next.
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DATABASE_URL is: every web and qcluster process of a "
            "PostgreSQL deployment shares one key (see docs/deploy.md).")
    path = VAR_DIR / "secret_key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_text().strip()
        if not key:
            raise ImproperlyConfigured(f"{path} is empty; delete it to regenerate.") from None
        return key
    key = secrets.token_urlsafe(50)
    with open(fd, "w") as handle:
        handle.write(key)
    return key


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# The public base URL in links. Empty (the default): each request's own scheme
# and host; where there is no request (dispatchers, `ledger bootstrap`/`demo`),
# the local address on WAKELEDGER_PORT, which `make run` sets to its PORT.
SITE_URL = env_str("SITE_URL", "").rstrip("/")
LOCAL_URL = f"http://127.0.0.1:{env_int('WAKELEDGER_PORT', 8000, minimum=1, maximum=65535)}"
# Whether LOCAL_URL's port is known (set by `make run`, or by hand) or only
# the default: a command run on its own cannot tell which port the server has.
LOCAL_PORT_KNOWN = bool(os.environ.get("WAKELEDGER_PORT", "").strip())

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "oauth2_provider",  # OAuth 2.1 for /mcp's hosted connectors (api/mcp/oauth.py)
    "ledger",
    "api",
    "scheduling",
]

MIDDLEWARE = [
    # First: every log line of the request, and the outbox row it writes, carry its id.
    "ledger.project.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "api.parsing.RefuseChunkedBodies",
    "ledger.project.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Django's own class, named as such: the deploy checks (session cookie
    # Secure/HttpOnly) look for this exact path.
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "ledger.project.urls"
WSGI_APPLICATION = "ledger.project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "ledger.project.middleware.csp_nonce",
            ],
        },
    },
]

# Persistent connections matter twice here: opening a connection per request
# costs the append path, and on SQLite closing the last connection to a WAL
# database checkpoints the WAL, which costs about a third of the throughput.
CONN_MAX_AGE = env_int("WAKELEDGER_CONN_MAX_AGE", 600, minimum=0)
# How long a write may wait for the database (its write lock on SQLite, the
# goal's row or a start's lock on PostgreSQL) before it is refused: the API
# answers 503 database_busy with Retry-After, and nothing is recorded
# (docs/reliability.md); WAKELEDGER_SQLITE_BUSY_TIMEOUT is its older name. A
# locked database is a quick clear answer, not a worker held for half a minute.
WAKELEDGER_DB_WAIT_SECONDS = env_int(
    "WAKELEDGER_DB_WAIT_SECONDS", env_int("WAKELEDGER_SQLITE_BUSY_TIMEOUT", 5, minimum=1),
    minimum=1)

if env_str("DATABASE_URL"):
    DATABASES = {"default": database_from_url(env_str("DATABASE_URL"))}
    DATABASES["default"]["CONN_MAX_AGE"] = CONN_MAX_AGE
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Behind a transaction-pooling PgBouncer each transaction may run on
    # another server connection: no cursor may outlive its transaction
    # (Django's server-side cursors are WITH HOLD outside one). docs/deploy.md.
    if env_bool("WAKELEDGER_PG_TRANSACTION_POOLING", False):
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    elif DATABASES["default"]["ENGINE"].endswith("postgresql"):
        # Every lock wait of the ledger's connections (a command's goal row, a
        # start's advisory lock) ends after the same bound, and is answered
        # 503 database_busy: set once per connection, so no command pays a
        # round trip for it. A lock_timeout in DATABASE_URL's options wins
        # (it comes later on libpq's command line). A pooler refuses the
        # startup packet's options: behind one the bound is the database
        # role's own lock_timeout (docs/deploy.md).
        given = DATABASES["default"]["OPTIONS"].get("options", "")
        DATABASES["default"]["OPTIONS"]["options"] = (
            f"-c lock_timeout={WAKELEDGER_DB_WAIT_SECONDS * 1000} {given}".strip())
else:
    DATABASES = {
        "default": {
            # Django's backend with writers queued on a file lock (see its module).
            "ENGINE": "ledger.backends.sqlite3",
            "NAME": VAR_DIR / "ledger.sqlite3",
            "CONN_MAX_AGE": CONN_MAX_AGE,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": {
                # IMMEDIATE takes the write lock at BEGIN: a command's "lock the
                # goal, decide, append" can then never fail half-way with
                # SQLITE_BUSY on lock upgrade (SQLite has no SELECT … FOR UPDATE).
                "transaction_mode": "IMMEDIATE",
                "timeout": WAKELEDGER_DB_WAIT_SECONDS,
                # WAL lets the admin and the API read while a command writes.
                # synchronous=FULL keeps every committed event on disk at once.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
USE_I18N = True
USE_TZ = True
# Times in the admin's lists and pages: UTC to the second (ledger/project/formats/).
FORMAT_MODULE_PATH = ["ledger.project.formats"]
TIME_ZONE = "UTC"

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every start without it
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGIN_URL = "admin:login"

# ---------------------------------------------------------------- security
# The production profile (docs/deploy.md): WAKELEDGER_HTTPS=1 when the site is
# served over HTTPS only; WAKELEDGER_BEHIND_PROXY=1 when a reverse proxy (or
# load balancer) terminates TLS and sets X-Forwarded-Proto / X-Forwarded-For.
# Under both, `manage.py check --deploy` is clean.
WAKELEDGER_HTTPS = env_bool("WAKELEDGER_HTTPS", False)
WAKELEDGER_BEHIND_PROXY = env_bool("WAKELEDGER_BEHIND_PROXY", False)
if WAKELEDGER_BEHIND_PROXY:
    # Only safe when the proxy overwrites this header on every request.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = env_bool("WAKELEDGER_USE_X_FORWARDED_HOST", False)
if WAKELEDGER_HTTPS:
    SECURE_SSL_REDIRECT = env_bool("WAKELEDGER_SSL_REDIRECT", True)
    # The load balancer's health checks come over plain HTTP.
    SECURE_REDIRECT_EXEMPT = [r"^api/v1/health$"]
    SECURE_HSTS_SECONDS = env_int("WAKELEDGER_HSTS_SECONDS", 31536000, minimum=1)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("WAKELEDGER_HSTS_INCLUDE_SUBDOMAINS", True)
    # Makes the site eligible for browsers' preload lists; it is submitted
    # only by hand (hstspreload.org).
    SECURE_HSTS_PRELOAD = env_bool("WAKELEDGER_HSTS_PRELOAD", True)
    # Turning one of these off is a decision (the proxy redirects; another
    # site lives on a subdomain), not something `check --deploy` should nag about.
    SILENCED_SYSTEM_CHECKS = [check for check, on in (
        ("security.W008", SECURE_SSL_REDIRECT),
        ("security.W005", SECURE_HSTS_INCLUDE_SUBDOMAINS),
        ("security.W021", SECURE_HSTS_PRELOAD)) if not on]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SESSION_COOKIE_NAME = "__Host-sessionid"
    CSRF_COOKIE_NAME = "__Host-csrftoken"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Admin sessions end after 8 hours, not Django's two weeks.
SESSION_COOKIE_AGE = env_int("WAKELEDGER_SESSION_SECONDS", 8 * 3600, minimum=300)

# Counters for the throttles below live here: the database cache, because every
# gunicorn worker, web process and host must see the same counts and the
# database is the one thing they all share (a file cache under var/ is per
# host; the local-memory cache is per worker). The table is created by
# `migrate` (api/apps.py) and by the test runner.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "wakeledger_cache",
        "OPTIONS": {"MAX_ENTRIES": 100_000},
    }
}
# Bad bearer tokens: after LIMIT within WINDOW seconds of the first from one
# address, every bearer request from it gets 429 throttled (Retry-After) for
# WINDOW seconds.
WAKELEDGER_BAD_TOKEN_LIMIT = env_int("WAKELEDGER_BAD_TOKEN_LIMIT", 20, minimum=1)
WAKELEDGER_BAD_TOKEN_WINDOW_SECONDS = env_int("WAKELEDGER_BAD_TOKEN_WINDOW_SECONDS", 60,
                                              minimum=1, maximum=86400)
# Admin logins: after LIMIT failures for one username from one address (or
# 5 x LIMIT for any usernames from one address) in LOCKOUT seconds, the login
# form refuses that username from that address until the window ends.
WAKELEDGER_LOGIN_FAILURE_LIMIT = env_int("WAKELEDGER_LOGIN_FAILURE_LIMIT", 10, minimum=1)
WAKELEDGER_LOGIN_LOCKOUT_SECONDS = env_int("WAKELEDGER_LOGIN_LOCKOUT_SECONDS", 15 * 60,
                                           minimum=1, maximum=86400)

# ---------------------------------------------------------------- REST API
# /mcp (MCP over streamable HTTP): the browser Origins allowed besides this
# site's own (a page elsewhere is refused: DNS rebinding), and the calls one
# credential (API token or OAuth grant) may make per minute.
WAKELEDGER_MCP_ALLOWED_ORIGINS = env_list("WAKELEDGER_MCP_ALLOWED_ORIGINS", [])
WAKELEDGER_MCP_CALLS_PER_MINUTE = env_int("WAKELEDGER_MCP_CALLS_PER_MINUTE", 300, minimum=1)
# OAuth 2.1 for hosted connectors (ChatGPT, Claude): django-oauth-toolkit with
# every RFC 9700 gate on (ledger/project/oauth.py says which; docs/agents.md §5).
WAKELEDGER_OAUTH_ACCESS_TOKEN_SECONDS = env_int("WAKELEDGER_OAUTH_ACCESS_TOKEN_SECONDS", 3600,
                                                minimum=60, maximum=86400)
WAKELEDGER_OAUTH_REFRESH_TOKEN_SECONDS = env_int("WAKELEDGER_OAUTH_REFRESH_TOKEN_SECONDS",
                                                 30 * 86400, minimum=3600,
                                                 maximum=366 * 86400)
# Loopback http redirect URIs (RFC 8252: local clients such as Claude Code's
# OAuth) are allowed by default only without the HTTPS profile, where
# `check --deploy` would warn about any http redirect; hosted connectors
# redirect to https. Local clients can always send an API token instead.
WAKELEDGER_OAUTH_LOOPBACK = env_bool("WAKELEDGER_OAUTH_LOOPBACK", not WAKELEDGER_HTTPS)
# Client ID Metadata Documents: offered unless off; fetched from public
# addresses only, unless listed here (CIDRs, e.g. an intranet's 10.0.0.0/8).
WAKELEDGER_OAUTH_CIMD = env_bool("WAKELEDGER_OAUTH_CIMD", True)
WAKELEDGER_OAUTH_CIMD_PRIVATE_NETWORKS = env_networks("WAKELEDGER_OAUTH_CIMD_PRIVATE_NETWORKS")
OAUTH2_PROVIDER = oauth.provider_settings(WAKELEDGER_OAUTH_ACCESS_TOKEN_SECONDS,
                                          WAKELEDGER_OAUTH_REFRESH_TOKEN_SECONDS,
                                          loopback=WAKELEDGER_OAUTH_LOOPBACK,
                                          cimd=WAKELEDGER_OAUTH_CIMD)
# Request bodies above this are refused with 413 (agents send small JSON).
WAKELEDGER_MAX_BODY_BYTES = env_int("WAKELEDGER_MAX_BODY_BYTES", 256 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = WAKELEDGER_MAX_BODY_BYTES
# How long an Idempotency-Key's record (and so its replayable answer) is kept;
# `ledger prune` and its hourly schedule delete older ones. At least an hour:
# a client's retries must find the record of the attempt they repeat.
WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS = env_int("WAKELEDGER_IDEMPOTENCY_RETENTION_HOURS", 48,
                                                 minimum=1, maximum=24 * 366)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["api.parsing.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's negotiation with the everyday Accept headers answered up front.
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "api.parsing.Negotiation",
    "EXCEPTION_HANDLER": "api.errors.handler",
    "DEFAULT_SCHEMA_CLASS": "api.schema.AnswerSchema",  # declares response headers too
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Wake Ledger API",
    "DESCRIPTION": (
        "Goals, fenced leases, checkpoints and exactly-once wakes for long-running agent "
        "work. Authenticate with `Authorization: Bearer <token>`. Every fenced call carries "
        '`"lease": {"token", "generation"}`; every POST honours `Idempotency-Key`; every '
        "error is an RFC 9457 problem document with a stable `code`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": f"/{STATIC_URL}ledger/favicon.svg",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "GoalStatusEnum": "ledger.domain.state.STATUSES",
    },
}

# `manage.py flush` must not be able to erase the ledger: the append-only
# triggers refuse it unless this is set (the test suite sets it, because Django
# flushes the test database between transactional tests).
WAKELEDGER_ALLOW_FLUSH = env_bool("WAKELEDGER_ALLOW_FLUSH", False)

# django-q2 on its ORM broker: no service besides the database. Ours reads the
# queue oldest first (django-q2's has no ORDER BY: scheduling/broker.py).
Q_CLUSTER = {
    "name": "wakeledger",
    "orm": "default", "broker_class": "scheduling.broker.OldestFirstORM",
    "workers": env_int("WAKELEDGER_Q_WORKERS", 2, minimum=1, maximum=64),
    # A task is killed after `timeout` seconds and handed to another worker
    # after `retry` seconds; retry must exceed timeout or a slow task runs twice.
    "timeout": env_int("WAKELEDGER_Q_TIMEOUT", 60, minimum=5),
    "retry": env_int("WAKELEDGER_Q_RETRY", 120, minimum=10),
    # django-q2 retries a failed task forever unless attempts are bounded.
    "max_attempts": env_int("WAKELEDGER_Q_MAX_ATTEMPTS", 3, minimum=1),
    "ack_failures": True,
    # A watchdog that missed runs while the cluster was down fires once.
    "catch_up": False,
    "poll": 1,
    "save_limit": 1000,
    "label": "Scheduler",
}
# How often the cluster's guard loop runs (seconds; django-q2's default 0.5).
# django-q2 looks at schedules every 30 s of it, the first time 30 s after
# start-up; only the end-to-end tests set 30 so it also looks at start-up.
if env_int("WAKELEDGER_Q_GUARD_CYCLE", 0, minimum=0, maximum=30):
    Q_CLUSTER["guard_cycle"] = env_int("WAKELEDGER_Q_GUARD_CYCLE", 0)
if Q_CLUSTER["retry"] <= Q_CLUSTER["timeout"]:
    raise ImproperlyConfigured("WAKELEDGER_Q_RETRY must be greater than WAKELEDGER_Q_TIMEOUT.")

# ---------------------------------------------------------------- wakes
# Seconds in one "minute" of a goal's cadence_minutes. 60 in production; the
# end-to-end tests shrink it so a watchdog fires within seconds.
WAKELEDGER_CADENCE_UNIT_SECONDS = env_int("WAKELEDGER_CADENCE_UNIT_SECONDS", 60, minimum=1,
                                          maximum=60)
# The lease rule's stale grace after a lease's expiry, frozen into each goal's policy,
# and the failure rule's margin after a provider's reset time before the one-off wake:
# their defaults and bounds are the domain's (ledger/domain/policy.py).
WAKELEDGER_STALE_GRACE_SECONDS = env_int(
    "WAKELEDGER_STALE_GRACE_SECONDS", domain_policy.LEASE_STALE_GRACE_SECONDS,
    minimum=domain_policy.RANGES["stale_grace_seconds"][0],
    maximum=domain_policy.RANGES["stale_grace_seconds"][1])
WAKELEDGER_RESET_MARGIN_SECONDS = env_int(
    "WAKELEDGER_RESET_MARGIN_SECONDS", domain_policy.RESET_MARGIN_SECONDS,
    minimum=domain_policy.RESET_MARGIN_RANGE[0], maximum=domain_policy.RESET_MARGIN_RANGE[1])
# A pause to a reset further away than this is listed LONG_PAUSE for a person
# once it has lasted this long (docs/liveness.md), frozen into each goal.
WAKELEDGER_LONG_PAUSE_MINUTES = env_int(
    "WAKELEDGER_LONG_PAUSE_MINUTES", domain_policy.DEFAULT_POLICY["long_pause_minutes"],
    minimum=domain_policy.RANGES["long_pause_minutes"][0],
    maximum=domain_policy.RANGES["long_pause_minutes"][1])
# Caps on the durations an agent may choose (docs/liveness.md
# "Caps"): WAKELEDGER_MAX_LEASE_SECONDS, _MAX_CADENCE_MINUTES,
# _MAX_HOST_SILENCE_MINUTES (host_silent_slots x cadence), _MAX_READY_TIMEOUT_MINUTES,
# _MAX_JOB_DEADLINE_MINUTES, _MAX_PROGRESS_MINUTES, and on the counts
# _MAX_MAX_CONTINUATIONS, _MAX_MAX_WAKE_RETRIES. A cap may not lie below the
# default it caps: every goal that names no value would then be over it.
WAKELEDGER_CAPS = {}
for _name, _default in domain_policy.DEFAULT_CAPS.items():
    _variable = f"WAKELEDGER_MAX_{_name.upper()}"
    _range = domain_policy.RANGES.get(_name, (1, 100 * 1_440))
    _floor = (domain_policy.DEFAULT_POLICY["host_silent_slots"]
              * domain_policy.DEFAULT_POLICY["cadence_minutes"]
              if _name == "host_silence_minutes" else domain_policy.DEFAULT_POLICY[_name])
    WAKELEDGER_CAPS[_name] = env_int(_variable, _default, minimum=max(_range[0], _floor),
                                     maximum=_range[1])
WAKELEDGER_SWEEP_MINUTES = env_int("WAKELEDGER_SWEEP_MINUTES", 1, minimum=1, maximum=60)
# The scheduler is "silent" (the health check, the scheduler_silent notice)
# once no sweep completed for this long: three sweep intervals by default.
# Below two intervals a running scheduler looks silent between its passes:
# the end-to-end test sets a few seconds, an operator should not.
WAKELEDGER_SCHEDULER_SILENT_SECONDS = env_int(
    "WAKELEDGER_SCHEDULER_SILENT_SECONDS", 3 * 60 * WAKELEDGER_SWEEP_MINUTES, minimum=5,
    maximum=24 * 3600)
# An outbox row still "sending" this long after its dispatcher's timeout
# belongs to a sender that died mid-call: recorded as uncertain (the uncertain-attempt rule).
WAKELEDGER_OUTBOX_GRACE_SECONDS = env_int("WAKELEDGER_OUTBOX_GRACE_SECONDS", 60, minimum=0,
                                          maximum=3600)
# Fail points (ledger/eventstore/failpoints.py) for the crash tests; never in production.
WAKELEDGER_FAILPOINTS_ENABLED = env_bool("WAKELEDGER_FAILPOINTS_ENABLED", False)
# Dispatchers (what a granted internal wake does), configured by operators,
# never by agents. JSON: {"name": {"type": "webhook" | "command", ...}}; see
# scheduling/dispatch.py and docs/api.md (Dispatchers).
# One file every process reads (ledger/project/dispatchers.py): the variable
# only seeds it, and a variable that disagrees with it stops start-up.
_dispatchers_file = env_str("WAKELEDGER_DISPATCHERS_FILE", str(VAR_DIR / "dispatchers.json"))
WAKELEDGER_DISPATCHERS, WAKELEDGER_DISPATCHERS_SOURCE = dispatchers.load(
    Path(_dispatchers_file) if _dispatchers_file else None,
    os.environ.get("WAKELEDGER_DISPATCHERS"))
WAKELEDGER_RUNS_DIR = VAR_DIR / "runs"

# ---------------------------------------------------------------- notifications
# Channels told when a goal starts or stops needing a human (docs/notifications.md):
# Apprise URLs separated by whitespace, or a JSON list of URLs and
# {"url", "agents", "workspaces", "reasons"} objects. Checked when the app
# loads (ledger.notify.channels); the URLs are never logged nor stored.
WAKELEDGER_NOTIFY = env_str("WAKELEDGER_NOTIFY", "")
# A reminder every this many hours while a goal stays unattended (0: none).
WAKELEDGER_NOTIFY_REMIND_HOURS = env_int("WAKELEDGER_NOTIFY_REMIND_HOURS", 8, minimum=0,
                                         maximum=24 * 30)
# The daily digest's hour (UTC, 0-23); unset or empty: no digest.
WAKELEDGER_NOTIFY_DIGEST_HOUR = (env_int("WAKELEDGER_NOTIFY_DIGEST_HOUR", 0, minimum=0,
                                         maximum=23)
                                 if os.environ.get("WAKELEDGER_NOTIFY_DIGEST_HOUR", "").strip()
                                 else None)
# Attempts per notification before it is marked failed (backoff 1, 2, 4 … 60 min).
WAKELEDGER_NOTIFY_MAX_ATTEMPTS = env_int("WAKELEDGER_NOTIFY_MAX_ATTEMPTS", 8, minimum=1,
                                         maximum=100)
# How long one send may take before a row left "sending" is sent again
# (plus WAKELEDGER_OUTBOX_GRACE_SECONDS).
WAKELEDGER_NOTIFY_TIMEOUT_SECONDS = env_int("WAKELEDGER_NOTIFY_TIMEOUT_SECONDS", 30, minimum=5,
                                            maximum=600)

# ---------------------------------------------------------------- the verifiable log
# The Ed25519 key that signs tree heads (docs/integrity.md): a PEM file,
# generated 0600 on first use when absent. Every process that seals (the
# qcluster, `ledger seal`) must read the same file; several hosts share one.
WAKELEDGER_SIGNING_KEY_FILE = Path(env_str("WAKELEDGER_SIGNING_KEY_FILE",
                                           str(VAR_DIR / "signing_key.pem")))
# How often the scheduler seals new events into the tree and signs a head.
WAKELEDGER_SEAL_MINUTES = env_int("WAKELEDGER_SEAL_MINUTES", 1, minimum=1, maximum=60)
# A witness outside the database: each new signed head is appended to this
# file as one JSON line (empty: none). Put it on another disk or host mount.
WAKELEDGER_HEAD_WITNESS_FILE = env_str("WAKELEDGER_HEAD_WITNESS_FILE", "")
# And/or a webhook: each new head POSTed as JSON by the scheduled seal (and
# `ledger seal`); a failure is logged, the head stays signed and stored.
WAKELEDGER_HEAD_WITNESS_URL = env_str("WAKELEDGER_HEAD_WITNESS_URL", "")

# The log's name in its C2SP checkpoints (the first line; also the note key's
# name): a schema-less URL, stable for the log's life (witnesses key on it).
WAKELEDGER_LOG_ORIGIN = env_str("WAKELEDGER_LOG_ORIGIN", "wakeledger.localhost/log")
# The sealer's own record of its latest signed checkpoint, outside the
# database (docs/integrity.md): "" keeps it next to the signing key
# (<key>.checkpoint, mode 0600); "off" keeps none (throwaway databases only).
WAKELEDGER_SEALER_STATE_FILE = env_str("WAKELEDGER_SEALER_STATE_FILE", "")
# Witnesses whose cosignatures the server accepts and serves: their note
# verifier keys (`wakeledger-verify witness --print-key`), comma-separated.
WAKELEDGER_WITNESS_KEYS = [k.strip() for k in env_str("WAKELEDGER_WITNESS_KEYS", "").split(",")
                           if k.strip()]
# A head awaiting a witness's cosignature this long: the witness is behind (shown, told).
WAKELEDGER_WITNESS_MAX_LAG_MINUTES = env_int("WAKELEDGER_WITNESS_MAX_LAG_MINUTES", 60, minimum=1)
# Witnesses the log pushes checkpoints to (C2SP add-checkpoint, docs/integrity.md): "URL VKEY", …
WAKELEDGER_TLOG_WITNESSES = [w for w in env_str("WAKELEDGER_TLOG_WITNESSES", "").split(",")
                             if w.strip()]


def _check_note_settings() -> None:
    from wakeledger_verify import add_checkpoint  # no Django: safe to import here
    refused = add_checkpoint.refused_settings(WAKELEDGER_LOG_ORIGIN, WAKELEDGER_WITNESS_KEYS,
                                              WAKELEDGER_TLOG_WITNESSES)
    if refused:
        raise ImproperlyConfigured(refused)


_check_note_settings()

# /metrics (docs/metrics.md): an auditor's or operator's API token, or this
# scrape token of its own (empty: none). At least 32 characters: it guards
# numbers about every goal.
WAKELEDGER_METRICS_TOKEN = env_str("WAKELEDGER_METRICS_TOKEN", "")
if WAKELEDGER_METRICS_TOKEN and (len(WAKELEDGER_METRICS_TOKEN) < 32
                                 or any(c.isspace() for c in WAKELEDGER_METRICS_TOKEN)):
    raise ImproperlyConfigured("WAKELEDGER_METRICS_TOKEN must be at least 32 characters, "
                               "without spaces.")
LOGGING = logging_from_environment()
