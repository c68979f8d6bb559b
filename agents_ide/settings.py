"""Settings, all from the environment (see .env.example and docs/configuration.md)."""

import ipaddress
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# litellm must never reach for the network for its cost map or tokenizers.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA_DIR = Path(os.environ.get("AGENTS_IDE_DATA_DIR", BASE_DIR / "data")).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)
# The data directory holds the SQLite database and the secret key: tools run in the sandbox must not read it.
os.chmod(DATA_DIR, 0o700)


def _secret_key() -> str:
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        os.chmod(path, 0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Fernet keys that encrypt stored secrets (provider and E2B keys, MCP tokens, headers and env, agents' and tools'
# variables: core/crypto.py), comma-separated: the first encrypts, all decrypt. To rotate, put a new key first, run
# `manage.py rotate_secrets`, then drop the old one. Unset: one key derived from SECRET_KEY (HKDF-SHA256).
SECRETS_KEYS = env_list("SECRETS_KEYS", "")
DEBUG = env_bool("DEBUG")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "http://127.0.0.1:8000,http://localhost:8000")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "ninja",  # serves Swagger UI's assets for /v1/docs from here, so the docs work offline
    "django_tasks",
    "core",
    "memory",
    "tools",
]

MIDDLEWARE = [
    "core.telemetry.middleware.RequestLogMiddleware",  # first: its log line times the whole request
    "django.middleware.security.SecurityMiddleware",
    "agents_ide.client_cors.ClientTokenCorsMiddleware",  # a client-side token's browser app: preflight, ACAO
    "agents_ide.security.ContentSecurityPolicyMiddleware",
    "agents_ide.middleware.JsonApiErrorsMiddleware",
    "agents_ide.validation.RequestGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "core.web.middleware.FirstRunMiddleware",
    "core.web.middleware.VersionAuthorMiddleware",
    "agents_ide.middleware.SyncChain",  # last: the chain runs on the request's thread in one pass
]

ROOT_URLCONF = "agents_ide.urls"
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
                "agents_ide.security.csp_nonce",
            ],
        },
    },
]
WSGI_APPLICATION = None
ASGI_APPLICATION = "agents_ide.asgi.application"

# Unset or empty: the embedded SQLite database in the data directory.
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'agents_ide.sqlite3'}"
# Connections outlive requests (request threads are pooled: agents_ide/http.py); a reused PostgreSQL
# connection is checked before a request uses it.
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL, conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "300")), conn_health_checks=True
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's SQLite backend plus a process-wide writer lock (agents_ide/sqlite/base.py); IMMEDIATE
    # transactions take SQLite's write lock up front, so concurrent writers queue instead of failing.
    DATABASES["default"]["ENGINE"] = "agents_ide.sqlite"
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
IS_POSTGRES = DATABASES["default"]["ENGINE"].endswith("postgresql")
DB_POOL_MAX = int(os.environ.get("DB_POOL_MAX", "20"))
if IS_POSTGRES and DB_POOL_MAX > 0:
    # Django's own pool (psycopg_pool): a thread borrows a connection for its database work and gives it back
    # when the request ends, a pool task ends, or a run starts a slow call (core/transactions.py), so a
    # process holds at most DB_POOL_MAX connections however many runs wait on models at once.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 2, "max_size": DB_POOL_MAX, "timeout": 30}
if IS_POSTGRES:
    # Parameters travel beside the statement (psycopg's server-side binding) instead of being quoted into its text
    # in Python: a step's stored request (kilobytes of JSON, every step) costs about a fifth less CPU to insert.
    DATABASES["default"].setdefault("OPTIONS", {})["server_side_binding"] = True
# Test databases are per test process (concurrent test runs on one machine must not share one), and on SQLite
# a file rather than memory, so server processes started by the tests can open the same database.
_test_suffix = os.environ.get("TEST_DB_SUFFIX") or str(os.getpid())
DATABASES["default"]["TEST"] = {
    "NAME": f"test_{DATABASES['default']['NAME']}_{_test_suffix}"
    if IS_POSTGRES
    else str(DATA_DIR / f"test-{_test_suffix}.sqlite3")
}

REDIS_URL = os.environ.get("REDIS_URL", "")
# Messages a listener (a tab, an SSE stream) may fall behind by before the embedded layer drops them: token chunks
# come every ~20 ms per run, so the channels default of 100 would drop a slow reader's events within seconds.
CHANNEL_CAPACITY = int(os.environ.get("CHANNEL_CAPACITY", "1000"))


def redis_channel_layers(url: str) -> dict:
    """The channel layer shared by processes over Redis: pub/sub (a group send is one PUBLISH, pushed to the
    processes that joined the group), not channels-redis's queue layer (sorted sets, a script, a blocking pop and a
    backup write per message received). Either delivers to the listeners joined when a message is sent; neither keeps
    an event for a tab that connects later."""
    return {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [url]}}}


if REDIS_URL:
    CHANNEL_LAYERS = redis_channel_layers(REDIS_URL)
else:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "core.channel_layer.LocalChannelLayer", "CONFIG": {"capacity": CHANNEL_CAPACITY}}
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
AUTHENTICATION_BACKENDS = ["core.throttle.ThrottledModelBackend"]
# Login throttling (core/throttle.py): after LOGIN_FAILURES_PER_ACCOUNT failed logins to one account from one address,
# that address must wait for that account (its owner elsewhere is not locked out); after LOGIN_FAILURES_PER_ADDRESS
# failures from an address, to any accounts, the address must wait.
LOGIN_FAILURES_PER_ACCOUNT = int(os.environ.get("LOGIN_FAILURES_PER_ACCOUNT", "5"))
LOGIN_FAILURES_PER_ADDRESS = int(os.environ.get("LOGIN_FAILURES_PER_ADDRESS", "20"))
LOGIN_LOCKOUT_S = int(os.environ.get("LOGIN_LOCKOUT_S", "900"))
# Throttling counters (and other short-lived state) live in the cache: Redis when configured, so every process
# counts the same failures.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "agents"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Agents IDE ---
# The model new agents get when none is chosen; any litellm handle ("openai/gpt-4o-mini", "ollama/llama3.1", ...).
DEFAULT_MODEL = os.environ.get("DEFAULT_MODEL", "openai/gpt-4o-mini")
# Embedding model handle for archival memory; empty = full-text search only.
EMBEDDING_MODEL = os.environ.get("EMBEDDING_MODEL", "")
LLM_TIMEOUT_S = float(os.environ.get("LLM_TIMEOUT_S", "120"))
# Stream model replies token by token to open tabs and `stream_tokens` SSE callers (off: one event per step).
LLM_STREAMING = env_bool("LLM_STREAMING", True)
# Sandbox: the deployment default backend; a tool may override it explicitly.
SANDBOX_DEFAULT = os.environ.get("SANDBOX_DEFAULT", "local")
SANDBOX_TIMEOUT_S = float(os.environ.get("SANDBOX_TIMEOUT_S", "60"))
SANDBOX_LOCAL_ALLOW_PIP = env_bool("SANDBOX_LOCAL_ALLOW_PIP")
SANDBOX_CACHE_DIR = Path(os.environ.get("SANDBOX_CACHE_DIR", DATA_DIR.parent / ".sandbox-cache"))
# Network for tools that don't choose (a tool's own `allow_network` wins); off = only the run's own loopback.
SANDBOX_ALLOW_NETWORK = env_bool("SANDBOX_ALLOW_NETWORK")
# Without user namespaces local runs are refused; this runs them anyway, with no file or network isolation.
SANDBOX_LOCAL_WEAK_ISOLATION = env_bool("SANDBOX_LOCAL_WEAK_ISOLATION")
# Local sandboxes started ahead per profile, each used by one run (tools/sandbox/warm.py); 0 = start each on demand.
SANDBOX_WARM_POOL = int(os.environ.get("SANDBOX_WARM_POOL", "2"))
MCP_IDLE_TIMEOUT_S = float(os.environ.get("MCP_IDLE_TIMEOUT_S", "300"))  # a stdio MCP server idle this long stops
# --- What tenants may run (the operator's choice; docs/security.md) ---
# Who may register and start stdio MCP servers (processes on this machine): "staff" (the default), "all" or "off".
MCP_STDIO = os.environ.get("MCP_STDIO", "staff").strip().lower()
# Directories a stdio MCP server may see, read-only, beside /usr and its own interpreter (npm or pip installs the
# operator approved, e.g. /opt/mcp); colon-separated. Nothing else of the host, whatever its arguments name.
MCP_STDIO_PATHS = [p for p in os.environ.get("MCP_STDIO_PATHS", "").split(":") if p.strip()]
# A stdio MCP server that has not answered the MCP handshake this long after its start is stopped (sooner when
# it writes something that is not MCP or exits).
MCP_START_TIMEOUT_S = float(os.environ.get("MCP_START_TIMEOUT_S", "10"))
# The same for the first start of a package runner's server (npx, uvx, bunx, pnpx, pipx) in a process: it may
# download and install its package before it answers.
MCP_INSTALL_TIMEOUT_S = float(os.environ.get("MCP_INSTALL_TIMEOUT_S", "300"))
# Who may give tools and MCP servers network access: "all" (the default), "staff" or "off". Granted, it reaches
# only the public internet through the egress guard (core/egress.py).
TOOL_NETWORK = os.environ.get("TOOL_NETWORK", "all").strip().lower()
# Internal addresses the operator lets requests made for users reach (comma-separated hosts, IPs or CIDRs, each
# optionally with :port), e.g. "10.0.0.5:11434". The deployment's model endpoints (provider base URLs from the
# environment) are allowed at their model API's paths without being listed (core/egress_rules.py).
EGRESS_ALLOW = [h.strip() for h in os.environ.get("EGRESS_ALLOW", "").split(",") if h.strip()]
E2B_API_KEY = os.environ.get("E2B_API_KEY", "")
E2B_TEMPLATE = os.environ.get("E2B_TEMPLATE", "")
# Built-in web tools (tools/web_tools.py). web_search uses Exa with EXA_API_KEY, else the SearXNG at SEARXNG_URL
# (an agent's secrets of the same names come first); fetch_webpage needs neither.
EXA_API_KEY = os.environ.get("EXA_API_KEY", "")
EXA_API_URL = os.environ.get("EXA_API_URL", "https://api.exa.ai")
SEARXNG_URL = os.environ.get("SEARXNG_URL", "")
WEB_TOOLS_TIMEOUT_S = float(os.environ.get("WEB_TOOLS_TIMEOUT_S", "30"))
WEB_FETCH_MAX_BYTES = int(os.environ.get("WEB_FETCH_MAX_BYTES", str(5 * 1024 * 1024)))
# Public base URL tools use to call back into our REST API. Unset, it is the address scripts/serve listens on
# (HOST/PORT); a wildcard bind is reached through loopback.
_SERVE_HOST = os.environ.get("HOST", "") or "127.0.0.1"
_SERVE_HOST = "127.0.0.1" if _SERVE_HOST in ("0.0.0.0", "::", "[::]") else _SERVE_HOST
_SERVE_HOST = f"[{_SERVE_HOST}]" if ":" in _SERVE_HOST and not _SERVE_HOST.startswith("[") else _SERVE_HOST
PUBLIC_BASE_URL = os.environ.get("PUBLIC_BASE_URL") or f"http://{_SERVE_HOST}:{os.environ.get('PORT') or '8000'}"


def _beyond_loopback(host: str) -> bool:
    host = host.strip().strip("[]").lower()
    if host in ("", "localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback  # a wildcard (0.0.0.0, ::) included
    except ValueError:
        return True  # a name other machines may resolve


# The first account's form asks for a one-time token the server prints on its console when others may reach it: bound
# (HOST) or published (PUBLIC_BASE_URL) at an address other than loopback (docs/security.md). Whoever reached /setup/
# first would otherwise administer the server.
SETUP_TOKEN_REQUIRED = _beyond_loopback(os.environ.get("HOST", "")) or _beyond_loopback(
    urlsplit(os.environ.get("PUBLIC_BASE_URL", "")).hostname or ""
)
# Run agent steps on the task queue worker instead of in the web process (see docs/architecture.md, scale-out).
RUNS_IN_WORKER = env_bool("RUNS_IN_WORKER")
# Multi-agent loop guard: how many agent-to-agent hops one conversation may take.
MULTI_AGENT_MAX_DEPTH = int(os.environ.get("MULTI_AGENT_MAX_DEPTH", "3"))
# How long send_message_to_agent_and_wait_for_reply waits for the other agent's reply.
MULTI_AGENT_REPLY_TIMEOUT_S = float(os.environ.get("MULTI_AGENT_REPLY_TIMEOUT_S", "300"))
# Background runs: django-tasks with its database backend (works on SQLite and PostgreSQL, no broker).
TASKS = {"default": {"BACKEND": "core.runs.task_backend.DatabaseBackend"}}  # our table, core.models.QueuedTask
# Runs one process executes at once (threads: runs wait on the LLM, not the CPU).
RUN_WORKER_THREADS = int(os.environ.get("RUN_WORKER_THREADS", "32"))
# A worker renews the lease of its runs every RUN_LEASE_S/3 s; a run whose lease lapsed is marked failed.
RUN_LEASE_S = float(os.environ.get("RUN_LEASE_S", "30"))
# A run waiting for an approval, a client tool's result or past a breakpoint ends (its calls denied) after this long.
RUN_WAIT_TTL_S = float(os.environ.get("RUN_WAIT_TTL_S", str(24 * 3600)))
RUN_POLL_S = float(os.environ.get("RUN_POLL_S", "0.2"))

# --- Request limits and transport security ---
# Largest request body (JSON or form fields) accepted; bigger ones get 413. Multipart uploads (agent files)
# may add up to the agent file limit (16 MiB) on top.
MAX_REQUEST_BYTES = int(os.environ.get("MAX_REQUEST_BYTES", str(8 * 1024 * 1024)))
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES
# Behind HTTPS: mark cookies Secure and send HSTS (seconds; 0 = off). SECURE_PROXY_SSL_HEADER trusts a
# proxy's X-Forwarded-Proto only when asked to.
SECURE_COOKIES = env_bool("SECURE_COOKIES")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_COOKIES
SECURE_HSTS_SECONDS = int(os.environ.get("HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS")
if env_bool("TRUST_X_FORWARDED_PROTO"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Reverse proxies whose X-Forwarded-For is believed (comma-separated addresses or CIDRs; agents_ide/proxies.py): a
# request from one of them is the rightmost forwarded address no trusted proxy owns, for the login lockout, the
# throttles and the logs. Empty: every request is its direct peer's (behind a proxy, the proxy's: one for everyone).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", "")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

# --- Folder files: what one upload may cost, what an account may store (docs/security.md#documents) ---
# Largest file uploaded to a folder (413 above it).
FOLDER_FILE_MAX_BYTES = int(os.environ.get("FOLDER_FILE_MAX_BYTES", str(16 * 1024 * 1024)))
# A zip-based document (DOCX, PPTX, XLSX) is refused before it is parsed when it unpacks to more bytes (nested
# archives included, counted as really decompressed), holds more entries, has an entry compressed past this ratio,
# or nests archives deeper.
FOLDER_FILE_MAX_EXPANDED_BYTES = int(os.environ.get("FOLDER_FILE_MAX_EXPANDED_BYTES", str(200 * 1024 * 1024)))
FOLDER_FILE_MAX_ENTRIES = int(os.environ.get("FOLDER_FILE_MAX_ENTRIES", "10000"))
FOLDER_FILE_MAX_RATIO = float(os.environ.get("FOLDER_FILE_MAX_RATIO", "200"))
FOLDER_FILE_MAX_NESTING = int(os.environ.get("FOLDER_FILE_MAX_NESTING", "3"))
# The text one file may yield, and the passages (chunks) it may make.
FOLDER_FILE_MAX_CHARS = int(os.environ.get("FOLDER_FILE_MAX_CHARS", "10000000"))
FOLDER_FILE_MAX_PASSAGES = int(os.environ.get("FOLDER_FILE_MAX_PASSAGES", "20000"))
# Documents are parsed in processes of their own: at most this many at once per server process, each with this
# address space, CPU time and wall-clock time.
FOLDER_PARSE_PROCESSES = int(os.environ.get("FOLDER_PARSE_PROCESSES", "2"))
FOLDER_PARSE_MEMORY_MB = int(os.environ.get("FOLDER_PARSE_MEMORY_MB", "1024"))
FOLDER_PARSE_CPU_S = int(os.environ.get("FOLDER_PARSE_CPU_S", "300"))
FOLDER_PARSE_TIMEOUT_S = float(os.environ.get("FOLDER_PARSE_TIMEOUT_S", "600"))
# What one account's folders may hold: file bytes (uploads refused past it) and passages (uploads refused once
# reached; a file that would pass it ends `error`).
FOLDER_ACCOUNT_MAX_BYTES = int(os.environ.get("FOLDER_ACCOUNT_MAX_BYTES", str(1024 * 1024 * 1024)))
FOLDER_ACCOUNT_MAX_PASSAGES = int(os.environ.get("FOLDER_ACCOUNT_MAX_PASSAGES", "200000"))

# --- Observability (docs/observability.md) ---
# Traces over OTLP/HTTP when an endpoint is set; the exporter reads the other standard OTEL_* variables itself.
OTEL_TRACES_ENABLED = (
    bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    and not env_bool("OTEL_SDK_DISABLED")
    and os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() != "none"
)
# Prompts and completions on model-call spans (they may hold personal data): off unless asked for.
OTEL_CAPTURE_MESSAGE_CONTENT = env_bool("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
# A trace UI's address for a trace id, e.g. http://jaeger:16686/trace/{trace_id}: the IDE links runs and steps to it.
TRACE_UI_URL = os.environ.get("TRACE_UI_URL", "")
# /metrics answers a scraper sending this bearer token; unset, /metrics is off (404).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
# Model handles /metrics names in its `model` labels, besides DEFAULT_MODEL, EMBEDDING_MODEL and the curated models of
# the environment's providers (comma-separated); any other model is counted as "other" (tenants choose model names).
METRICS_MODELS = env_list("METRICS_MODELS", "")
# "json": one JSON object per log line (with request, run, step and agent ids); else plain text.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text").strip().lower()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"ids": {"()": "core.telemetry.logs.ContextFilter"}},
    "formatters": {
        "json": {"()": "core.telemetry.logs.JsonFormatter"},
        "text": {"()": "core.telemetry.logs.TextFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["ids"],
            "formatter": "json" if LOG_FORMAT == "json" else "text",
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    # one line per request and per run end (LOG_REQUESTS=false: none)
    "loggers": {
        name: {"level": "INFO" if env_bool("LOG_REQUESTS", True) else "WARNING"}
        for name in ("agents_ide.requests", "agents_ide.runs")
    },
}
