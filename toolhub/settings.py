"""Settings for toolhub, read from the environment.

Production is the default: ``DEBUG`` is off unless ``DJANGO_DEBUG=1``, and without
``DJANGO_SECRET_KEY`` the process refuses to start. ``make run`` (the embedded demo) sets
``DJANGO_DEBUG=1``: SQLite, no broker, Celery tasks run eagerly in-process, a development key.
Set ``DATABASE_URL`` and ``CELERY_BROKER_URL`` for PostgreSQL and Redis with separate
``celery -A toolhub worker`` processes; the README's "Production" section lists the rest.
"""

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from toolhub.conf import DEFAULTS as _TOOLHUB
from toolhub.conf import MAX_SECONDS

BASE_DIR = Path(__file__).resolve().parent.parent


_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _env_bool(name: str, default: bool) -> bool:
    """On or off from the environment, or startup fails naming the variable (unset or empty: the default).

    A misspelt value (``flase``, ``ture``) is refused, not read as off: off is the unsafe side of some switches
    (``DJANGO_SECURE_SSL_REDIRECT``, ``DJANGO_SECURE_COOKIES``).
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in _ON + _OFF:
        return raw.lower() in _ON
    raise ImproperlyConfigured(
        f"{name}={raw[:100]!r}: must be one of {', '.join(_ON)} (on) or {', '.join(_OFF)} (off)."
    )


def _env_int(name: str, default: int, minimum: int, maximum: int = 1_000_000) -> int:
    """A whole number from the environment, or startup fails naming the variable (unset or empty: the default)."""
    raw = os.environ.get(name, "").strip() or str(default)
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(f"{name}={raw[:100]!r}: must be a whole number from {minimum} to {maximum}.")
    return value


def _env_seconds(name: str, default: float) -> float:
    """Seconds (above 0) from the environment, or startup fails naming the variable (unset or empty: the default)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= MAX_SECONDS:  # NaN fails too
        raise ImproperlyConfigured(f"{name}={raw[:100]!r}: must be a number of seconds above 0, at most {MAX_SECONDS}.")
    return value


#: DRF reads a rate as ``N/<period>`` and only the period's first letter (``30/minute``, ``5/s``).
_RATE_PERIODS = ("s", "m", "h", "d")


def _env_rate(name: str, default: str) -> str:
    """A throttle rate from the environment, or startup fails naming the variable (unset or empty: the default).

    DRF parses a rate when a throttled request comes: a malformed one would fail every such request with a 500.
    """
    raw = os.environ.get(name, "").strip() or default
    count, _, period = raw.partition("/")
    if not (
        count.isascii() and count.isdigit() and int(count) >= 1 and period[:1] in _RATE_PERIODS and "/" not in period
    ):
        raise ImproperlyConfigured(
            f"{name}={raw[:100]!r}: must be a rate N/second, N/minute, N/hour or N/day, N a whole number of at least 1."
        )
    return raw


def _database_url(name: str, default: str, **options: Any) -> dict[str, Any]:
    """The database the URL in ``name`` names (unset or empty: ``default``), or startup fails naming the variable.

    The message never repeats the URL: it may hold the password.
    """
    try:
        return dict(dj_database_url.parse(os.environ.get(name) or default, **options))
    except (ValueError, dj_database_url.ParseError, dj_database_url.UnknownSchemeError) as exc:
        raise ImproperlyConfigured(f"{name} is not a database URL dj-database-url reads: {str(exc)[:300]}") from None


def _env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (any case) from the environment, or startup fails naming it (unset or empty: the default)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.upper() in choices:
        return raw.upper()
    raise ImproperlyConfigured(f"{name}={raw[:100]!r}: must be one of {', '.join(choices)}.")


def _env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# Off unless asked for: the debug page shows settings and connection strings to anyone.
DEBUG = _env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set. Set it to a long random value, e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`, kept the same on every web and "
            "worker process; or set DJANGO_DEBUG=1 for local development, which uses a development key."
        )
    # Only with DEBUG on (local development), so it never signs a production session.
    SECRET_KEY = "django-insecure-toolhub-development-key"
# Keys DJANGO_SECRET_KEY replaced: what they signed still verifies (sessions, and the keyed hash binding a call's
# approved arguments), so a key rotated while calls wait for approval or a worker does not void their approvals.
SECRET_KEY_FALLBACKS = _env_list("DJANGO_SECRET_KEY_FALLBACKS")
ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

# HTTPS: on by default without DEBUG (cookies only over TLS, http redirected to https).
SECURE_SSL_REDIRECT = _env_bool("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = _env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Sessions stored by their key's digest: a reader of the database holds no working cookie (toolhub.session_store).
SESSION_ENGINE = "toolhub.session_store"
# HSTS is sticky in browsers for its whole lifetime, so it is switched on deliberately, not by default.
SECURE_HSTS_SECONDS = _env_int("DJANGO_SECURE_HSTS_SECONDS", 0, minimum=0, maximum=MAX_SECONDS)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# Behind a TLS-terminating proxy: the header it sets to "https" (e.g. X-Forwarded-Proto). Trust it only
# when the proxy overwrites that header on every request; otherwise a client could claim https.
_proxy_ssl_header = os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip()
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)
USE_X_FORWARDED_HOST = _env_bool("DJANGO_USE_X_FORWARDED_HOST", False)
# Content-Security-Policy on every answer (django-csp): scripts, frames, forms and fetches only from this server,
# so markup that slipped into a page (a model's words, a tool's result) cannot run or send anything. Every page's
# scripts are files (the admin's, the API docs' split view, the browsable API's); inline styles stay allowed for
# the browsable API's and the widgets' style attributes, which run nothing. A download's own stricter policy
# (toolhub.downloads) is kept as it is.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

INSTALLED_APPS = [
    # django.contrib.admin, its site's password change under the login lockout (toolhub.admin_site).
    "toolhub.apps.ToolhubAdminConfig",
    # Before the apps whose commands change accounts, tokens and lockouts: its same-named ones record them.
    "toolhub.governed_commands.apps.GovernedCommandsConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "csp",
    # Login lockout of the console (toolhub.login_guard); its admin pages are toolhub's (toolhub.admin_logins).
    "axes",
    "toolhub.apps.ToolhubConfig",
    "toolhub.sagas.apps.SagasConfig",
    "approvals.apps.ApprovalsConfig",
    "agents_app.apps.AgentsConfig",
    "toolhub.adapters.openai_agents.apps.OpenAIAgentsAdapterConfig",
]
# The demo (ledger, orders, their tools and `load_demo`) belongs to the embedded mode; a production
# server leaves it out unless TOOLHUB_DEMO=1 asks for it (e.g. a throwaway demo on a real stack).
if _env_bool("TOOLHUB_DEMO", DEBUG):
    INSTALLED_APPS.append("demo.apps.DemoConfig")
if DEBUG:
    # The demo notification tool's key (its Secret preset) is a placeholder in local development, so every DEBUG
    # process (`make run`, `make worker`, the README's `manage.py` commands) has it, without a toolhub.W002 on each,
    # and its scrubbing can be seen; a real key in the environment wins. Production sets its own or is warned.
    DEMO_NOTIFY_API_KEY = os.environ.get("DEMO_NOTIFY_API_KEY") or "demo-notify-placeholder-key"

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The frame refusal and the policy, outside every middleware that answers by itself (a 400 for a NUL or a host
    # not allowed, a 413, a slash redirect), so those answers carry them as the views' and /mcp's do.
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Every answer private and stored nowhere: they hold tenants' data (toolhub.response_headers).
    "toolhub.response_headers.PrivateAnswersMiddleware",
    # A NUL in the path or query string is refused (400) before any view puts it into a query.
    "toolhub.middleware.StorableAddressMiddleware",
    # Below a prefix (``--root-path``) toolhub's cookies are set for it, not the whole host (toolhub.cookie_paths).
    "toolhub.cookie_paths.PrefixCookiesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The session's user carries its session, asked again after a wait (toolhub.credentials).
    "toolhub.credentials.SessionCredentialMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Last: turns a login axes refused into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Login lockout (django-axes). Failures are counted per (username, client address) pair: an attacker guessing one
# operator's password from one address locks only that pair, so spraying names from one address cannot lock every
# operator out, and the operator still logs in from their own address. The pair locks after AXES_FAILURE_LIMIT
# failures within the cool-off and stays locked (the right password included) until AXES_COOLOFF_TIME has passed
# since its last failure; a successful login clears its count. API tokens and MCP authenticate without passwords.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_FAILURE_LIMIT = _env_int("TOOLHUB_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(
    seconds=_env_int("TOOLHUB_LOGIN_COOLOFF_SECONDS", 15 * 60, minimum=1, maximum=MAX_SECONDS)
)
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = True
AXES_LOCKOUT_CALLABLE = "toolhub.login_guard.lockout_response"
# axes' database handler, keeping only the newest few failures' text in a pair's row (toolhub.login_attempts).
AXES_HANDLER = "toolhub.login_attempts.BoundedAttemptsHandler"
# The client address: the peer, or, behind DJANGO_TRUSTED_PROXY_COUNT proxies that append to X-Forwarded-For,
# the address the outermost one saw. 0 (the default): X-Forwarded-For is never read, since a client can write it.
TRUSTED_PROXY_COUNT = _env_int("DJANGO_TRUSTED_PROXY_COUNT", 0, minimum=0, maximum=20)
AXES_CLIENT_IP_CALLABLE = "toolhub.login_guard.client_ip"
AXES_USERNAME_CALLABLE = "toolhub.login_guard.attempted_username"
# toolhub registers axes' pages itself, for people who cross the tenant boundary only.
AXES_ENABLE_ADMIN = False
AXES_VERBOSE = False
# axes keeps a failure's form fields and masks only these (and "password"): the console's password change posts three.
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "old_password", "new_password1", "new_password2"]

ROOT_URLCONF = "toolhub.urls"
WSGI_APPLICATION = "toolhub.wsgi.application"

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
            ],
        },
    },
]

DATABASES = {
    "default": _database_url(
        "DATABASE_URL",
        f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=_env_int("DATABASE_CONN_MAX_AGE", 0, minimum=0, maximum=MAX_SECONDS),
        # A reused connection is checked (one round trip) before its first use in a request or task, so
        # one the server dropped meanwhile is replaced instead of failing the request.
        conn_health_checks=True,
    )
}
# PostgreSQL bounds neither by default: a slow statement, or a transaction left idle (an export whose client stopped
# reading), held its connection and locks for ever. Seconds; 0 leaves the server's or role's; a shorter bound the
# server, role or URL sets is kept; migrate lifts them; an atomic tool sets its own (toolhub.db_timeouts).
# PostgreSQL takes at most 2^31-1 ms.
DATABASE_STATEMENT_TIMEOUT = _env_int("DATABASE_STATEMENT_TIMEOUT", 60, minimum=0, maximum=2_147_483)
DATABASE_IDLE_IN_TRANSACTION_TIMEOUT = _env_int(
    "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT", 600, minimum=0, maximum=2_147_483
)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default serves one process; waiting on a lock beats failing on it.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Throttle counters live in the cache: in production give every web process the same one (Redis).
_cache_url = os.environ.get("DJANGO_CACHE_URL", "")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
        if _cache_url
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Moments read to the second with their time zone ("2026-12-05 05:34:19 UTC"): see toolhub/formats.
FORMAT_MODULE_PATH = ["toolhub.formats"]

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

# Named, not written out: Django reverses it below the script prefix (``--root-path``, ``SCRIPT_NAME``).
LOGIN_URL = "admin:login"

# E-mail (approval notifications): printed on the console unless a backend is configured, e.g.
# DJANGO_EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST and friends.
EMAIL_BACKEND = os.environ.get("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = _env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
# Seconds each wait on the mail server may take: unbounded, a server that never answers held the worker (or, embedded,
# the request) sending an approval's e-mails.
EMAIL_TIMEOUT = _env_int("EMAIL_TIMEOUT", 10, minimum=1, maximum=600)
DEFAULT_FROM_EMAIL = os.environ.get("DJANGO_DEFAULT_FROM_EMAIL", "toolhub@localhost")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # DRF's tokens, refused once older than TOOLHUB["API_TOKEN_MAX_AGE_SECONDS"] (toolhub.api.tokens); first,
        # so that a refused token answers 401 with ``WWW-Authenticate: Token`` (a session's refusal has no scheme).
        "toolhub.api.tokens.ExpiringTokenAuthentication",
        # The console's session, taken while its user may sign in to the console (staff; toolhub.api.sessions).
        "toolhub.api.sessions.ConsoleSessionAuthentication",
    ],
    # A tenant named by ?tenant= or X-Toolhub-Tenant is one of the caller's, every request (toolhub.api.named_tenant).
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "toolhub.api.named_tenant.NamesOneOfTheirTenants",
    ],
    # JSON as stored; the browsable API writes invisible characters out, as the admin does (toolhub.api.renderers).
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "toolhub.api.renderers.VisibleBrowsableAPIRenderer",
    ],
    # drf-spectacular's schema with each operation's error statuses (toolhub.api.schema).
    "DEFAULT_SCHEMA_CLASS": "toolhub.api.schema.ToolhubAutoSchema",
    "DEFAULT_PAGINATION_CLASS": "toolhub.api.pagination.NewestFirstCursorPagination",
    # Lists name a django-filter FilterSet (filterset_class); it narrows the tenant-scoped queryset.
    # A list shows the rows of the tenant ?tenant= or X-Toolhub-Tenant names (toolhub.api.named_tenant).
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "toolhub.api.named_tenant.NamedTenantFilter",
    ],
    # toolhub's errors answer the status their class declares (toolhub.exceptions), in every view.
    "EXCEPTION_HANDLER": "toolhub.api.exceptions.toolhub_exception_handler",
    "PAGE_SIZE": 50,
    # JSON nested too deep, or carrying text no column can store, is refused with a 400 when a view reads it.
    "DEFAULT_PARSER_CLASSES": [
        "toolhub.api.parsers.StorableJSONParser",
        "rest_framework.parsers.FormParser",
        # No view takes a file: a file part is refused (a POST's already by toolhub.middleware).
        "toolhub.api.parsers.FilelessMultiPartParser",
    ],
    # Only views that name a scope are throttled: starting runs and deciding approvals.
    "DEFAULT_THROTTLE_CLASSES": ["toolhub.api.throttling.ScopedRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "runs": _env_rate("TOOLHUB_THROTTLE_RUNS", "30/minute"),
        "decisions": _env_rate("TOOLHUB_THROTTLE_DECISIONS", "60/minute"),
        "calls": _env_rate("TOOLHUB_THROTTLE_CALLS", "600/minute"),
    },
}

SPECTACULAR_SETTINGS = {
    "TITLE": "toolhub API",
    "DESCRIPTION": "Administered, audited agent tools: agents, runs, governed tool calls, approvals.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI served from this server, so the API docs work without reaching a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # drf-spectacular's own hook, then the prefix served below (--root-path) as the server (toolhub.api.schema_servers).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "toolhub.api.schema_servers.add_root_path_server",
    ],
    # One stable schema name per choice set (several models share RiskLevel, several have a "status").
    "ENUM_NAME_OVERRIDES": {
        "RiskLevelEnum": "toolhub.models.RiskLevel",
        "CallStatusEnum": "toolhub.models.CallStatus",
        "ApprovalStatusEnum": "approvals.models.ApprovalStatus",
        "RunStatusEnum": "agents_app.models.RunStatus",
        "SagaStatusEnum": "toolhub.sagas.models.SagaStatus",
        "CompensationStatusEnum": "toolhub.sagas.models.CompensationStatus",
    },
}

# Celery: no broker configured means the embedded default, where tasks run eagerly in-process.
_broker = os.environ.get("CELERY_BROKER_URL", "")
# The switch is read even without a broker, so a misspelt one stops startup there too.
CELERY_TASK_ALWAYS_EAGER = _env_bool("CELERY_TASK_ALWAYS_EAGER", False) or not _broker
# Eager tasks never touch the broker; the in-memory transport only spares kombu an empty URL.
CELERY_BROKER_URL = _broker or "memory://localhost/"
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "toolhub")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes the database connection before and after every task unless this is set;
# set, it only does so every CELERY_DB_REUSE_MAX tasks, and toolhub/celery.py closes connections as
# Django does around a request instead: after DATABASE_CONN_MAX_AGE seconds (0, the default: after every
# task) or when broken. So workers reuse their connection exactly as long as web processes do.
CELERY_DB_REUSE_MAX = _env_int("CELERY_DB_REUSE_MAX", 1000, minimum=1)
# Every task has time limits: a soft one (SoftTimeLimitExceeded, so the task can clean up) and a hard
# one (the worker process is replaced). Tasks with their own budget set theirs: the tool-execution
# task follows the longest tool timeout, the agent step its provider's deadline.
CELERY_TASK_SOFT_TIME_LIMIT = _env_int("CELERY_TASK_SOFT_TIME_LIMIT", 300, minimum=1, maximum=MAX_SECONDS)
# Above the soft limit, or the task is killed before it is asked to clean up.
CELERY_TASK_TIME_LIMIT = _env_int(
    "CELERY_TASK_TIME_LIMIT",
    CELERY_TASK_SOFT_TIME_LIMIT + 60,
    minimum=CELERY_TASK_SOFT_TIME_LIMIT + 1,
    maximum=MAX_SECONDS + 60,
)
CELERY_BEAT_SCHEDULE = {
    "toolhub-sweep": {"task": "toolhub.tasks.sweep_task", "schedule": 30.0},
    "approvals-expire": {"task": "approvals.tasks.expire_approvals_task", "schedule": 30.0},
    "agents-sweep": {"task": "agents_app.tasks.sweep_runs_task", "schedule": 60.0},
    "sagas-sweep": {"task": "toolhub.sagas.tasks.sagas_sweep_task", "schedule": 5.0},
    # Expired console sessions (toolhub.session_store): nothing else deletes them.
    "toolhub-sessions-clear": {"task": "toolhub.tasks.sessions_clear_task", "schedule": 900.0},
    # Signed audit checkpoints every AUDIT_CHECKPOINT_SECONDS of toolhub/conf.py: toolhub.beat sets it again from
    # TOOLHUB when Celery finalizes (a deployment's settings module sets TOOLHUB after importing this one).
    "toolhub-audit-checkpoint": {
        "task": "toolhub.tasks.audit_checkpoint_task",
        "schedule": _env_seconds("TOOLHUB_AUDIT_CHECKPOINT_SECONDS", _TOOLHUB["AUDIT_CHECKPOINT_SECONDS"]),
    },
}

# toolhub's own tunables; toolhub.conf.ToolhubSettings declares them (types, defaults) and validates them.
# Local development reaches its fake model, Ollama and test MCP servers on loopback; production allows no
# private network until OUTBOUND_ALLOWED_NETWORKS lists it (toolhub.outbound_addresses).
TOOLHUB: dict = {"OUTBOUND_ALLOWED_NETWORKS": ["127.0.0.0/8", "::1/128"]} if DEBUG else {}

# Read here, not by logging.config: "info" or "verbose" there fails startup with "Unable to configure root logger".
_LOG_LEVEL = _env_choice("DJANGO_LOG_LEVEL", "WARNING", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": _LOG_LEVEL},
}
