"""toolhub's tunables: one typed, validated settings object built from the ``TOOLHUB`` settings dict.

``toolhub_settings()`` returns a frozen ``ToolhubSettings``. Each value comes from ``settings.TOOLHUB``,
else (for scalar ones) from the environment variable ``TOOLHUB_<NAME>``, else from its default here;
one rule for every key. The object is validated once (the app's ``ready`` builds it, so a bad value
fails startup with the key named) and rebuilt when ``settings.TOOLHUB`` changes (Django's
``setting_changed``: ``override_settings`` and pytest-django's ``settings`` fixture). Environment
variables are read when it is built.

``toolhub_setting(name)`` is a thin alias kept for code that names a key as a string.
"""

import ipaddress
import os
import threading
from typing import Annotated, Any, Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = ["DEFAULTS", "ToolhubSettings", "toolhub_settings", "toolhub_setting"]

Positive = Annotated[int, Field(gt=0)]
NonNegative = Annotated[int, Field(ge=0)]
#: The longest duration any ``*_SECONDS`` key may name (100 years): a deadline is a date counted from now, and one
#: past the year 9999 (``inf``, ``1e12``) would raise ``OverflowError`` in every call that computes it.
MAX_SECONDS = 100 * 365 * 24 * 3600
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]
SecondsOrZero = Annotated[float, Field(ge=0, le=MAX_SECONDS)]


def _network(value: str) -> str:
    """A network in CIDR notation (``10.0.0.0/8``, ``::1/128``) or one address; refused when it is neither."""
    return str(ipaddress.ip_network(value, strict=False))


Network = Annotated[str, AfterValidator(_network)]


class ToolhubSettings(BaseModel):
    """Every toolhub tunable with its type and default; ``settings.TOOLHUB`` overrides any of them."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, validate_default=True)

    # Longest string the model may pass in any argument; longer ones are rejected before anything runs.
    MAX_STRING_LENGTH: Positive = 10_000
    # Largest serialized argument payload, in bytes.
    MAX_ARGUMENTS_BYTES: Positive = 100_000
    # Largest serialized context a run may be started with, in bytes: every call of the run stores it again,
    # on its row and in its append-only audit trail.
    MAX_RUN_CONTEXT_BYTES: Positive = 10_000
    # Default per-run budget of tool calls when an agent does not set one.
    DEFAULT_MAX_TOOL_CALLS: Positive = 10
    # Seconds a worker holds a claimed call before the reconciler may take it back.
    CALL_LEASE_SECONDS: Seconds = 300
    # Attempts in a row a call of an idempotent or atomic tool may lose (its worker died while running it): the
    # reconciler queues it again only below this, so a call that takes its worker down (out of memory, a crash
    # in native code) does not do so forever. Then it needs attention (an atomic one's error says nothing it did
    # was kept), as any other tool's lost call does at once.
    CALL_MAX_ATTEMPTS: Positive = 3
    # Model steps in a row a run may lose (its worker stopped while the model answered: the step's lease lapsed
    # without its answer) before it fails instead of asking the model again: a step that takes its worker down
    # (an answer that exhausts memory, a crash in a client library) would otherwise repeat its paid model call on
    # every runs sweep, forever. A recorded answer, or retrying the failed run, starts the count again.
    RUN_MAX_LOST_STEPS: Positive = 3
    # Largest conversation a run keeps (its messages as JSON, in bytes): every step rewrites it and sends it to the
    # model. A turn, or a turn's results, that would pass it is not kept and the run fails (``conversation_size``);
    # without it a run held up to max_tool_calls turns and results of MAX_EXTERNAL_RESULT_BYTES each.
    RUN_MAX_CONVERSATION_BYTES: Positive = 16_000_000
    # Queued calls a worker claims in one transaction (group commit): its own call plus up to this many
    # minus one of the oldest others, run one after another, their outcomes recorded in one transaction.
    # 1 (the default) claims one call per delivery; a larger batch saves commits for short tools but runs
    # the batch's calls serially, and a worker killed mid-batch leaves the whole batch to the reconciler.
    WORKER_CLAIM_BATCH: Positive = 1
    # Let PostgreSQL prepare the hot path's statements (a call's audited writes, the locked reads of an approval
    # and of a loop step, the guarded status moves): parsed and planned once per connection, not per call.
    # Turn off behind a connection pooler that cannot keep prepared statements (PgBouncer before 1.22 in
    # transaction mode). Django's own queries are never prepared (it binds on the client).
    PREPARED_STATEMENTS: bool = True
    # Behind a pooler in transaction mode (PgBouncer ``pool_mode = transaction``) a session's SET or RESET stays on
    # the server connection that ran it, which then serves other clients: toolhub then sends none
    # (``toolhub.db_pooler``) and holds no cursor past a transaction. Its time bounds and prepared statements' plans
    # are the role's (``toolhub_db_roles`` sets them), the bounds lifted only with ``SET LOCAL`` inside a transaction.
    TRANSACTION_POOLER: bool = False
    # Seconds a queued call may wait for its broker message before the sweeper re-dispatches it.
    REDISPATCH_AFTER_SECONDS: SecondsOrZero = 60
    # Seconds a call of an external (schema-only) tool waits for its result before it expires.
    EXTERNAL_RESULT_TIMEOUT_SECONDS: Seconds = 24 * 3600
    # Seconds an approval request stays open before it expires.
    APPROVAL_TIMEOUT_SECONDS: Seconds = 24 * 3600
    # Number of independent audit hash chains (shards) of each tenant, and of the platform's events;
    # appends to one chain are serialized.
    AUDIT_CHAINS: Annotated[int, Field(gt=0, le=4096)] = 8
    # Dotted path of ``callable(exc) -> str`` that turns an execution error into the model's message.
    ERROR_HANDLER: str = ""
    # Whether a user may call a tool no grant mentions: "deny" (grants required) or "allow".
    DEFAULT_TOOL_ACCESS: Literal["deny", "allow"] = "deny"
    # Audit checkpoints are signed with the key in this environment variable (never in the database).
    AUDIT_KEY_ENV: str = "TOOLHUB_AUDIT_KEY"
    # Keys a rotation retired, in this environment variable, as ``N:KEY`` (whitespace between several): each still
    # verifies the checkpoints numbered up to N it signed, and no later one (``toolhub.audit_keys``).
    AUDIT_RETIRED_KEYS_ENV: str = "TOOLHUB_AUDIT_RETIRED_KEYS"
    # Seconds between two signed checkpoints written by beat, read once, when beat starts: toolhub.beat sets the
    # checkpoint task's schedule entry to it when Celery finalizes the app.
    AUDIT_CHECKPOINT_SECONDS: Seconds = 300
    # Hours of calls the admin index's dashboard reads (status counts, calls per tool per hour).
    DASHBOARD_HOURS: Positive = 24
    # Optional directory that receives a copy of every stored checkpoint (e.g. storage the database's
    # owner cannot write); verify_audit checks the newest file there too.
    AUDIT_CHECKPOINT_DIR: str = ""
    # The database role the web and workers connect with (``manage.py toolhub_db_roles`` creates it), and
    # the environment variable holding its password.
    DB_APP_ROLE: str = "toolhub_app"
    DB_APP_PASSWORD_ENV: str = "TOOLHUB_DB_APP_PASSWORD"
    # Optional URL that receives approval notifications (JSON, HMAC-signed with the key below).
    WEBHOOK_URL: str = ""
    WEBHOOK_SECRET_ENV: str = "TOOLHUB_WEBHOOK_SECRET"
    WEBHOOK_MAX_ATTEMPTS: Positive = 6
    # Networks (CIDR) toolhub may connect to although they are not public, for the URLs administrators configure
    # (model providers' base URLs, remote MCP servers, the webhook): loopback, private, link-local, unique-local,
    # multicast and unspecified addresses are refused otherwise, when saved and at every connection
    # (toolhub.outbound_addresses). E.g. ["10.20.0.0/16"] for an in-cluster model server. DEBUG allows loopback.
    OUTBOUND_ALLOWED_NETWORKS: list[Network] = []
    # E-mail approvers (through Django's e-mail backend) when a request arrives or escalates.
    APPROVAL_EMAILS: bool = True
    # The console's address as people reach it, with the prefix it is served below if any (e.g.
    # "https://toolhub.example.com" or "https://example.com/toolhub"): links in e-mails (toolhub.site_paths).
    CONSOLE_URL: str = ""
    # Seconds a pending approval waits before it escalates to the fallback group (when one is set).
    ESCALATE_AFTER_SECONDS: Seconds = 3600
    # How many close names to suggest for an unknown tool.
    UNKNOWN_TOOL_SUGGESTIONS: NonNegative = 3
    # Dotted path of ``callable(name, available_names) -> str``: what the model is told for an unknown tool.
    UNKNOWN_TOOL_HANDLER: str = ""
    # Dotted path of ``callable(tool_name, errors) -> str``: what the model is told for arguments that fail the
    # tool's schema; ``errors`` is a list of {"loc", "msg", "type"} (never the values). Bounded like the default.
    ARGUMENT_ERROR_HANDLER: str = ""
    # What the model reads when a tool returns None (it succeeded with nothing to say).
    NONE_RESULT_TEXT: str = "Done."
    # The tool-search provider: a name in toolhub.search.base.PROVIDERS or a dotted path to a factory.
    TOOL_SEARCH_PROVIDER: str = "lexical"
    # PostgreSQL text search configuration the "postgres" provider stems and drops stop words with.
    TOOL_SEARCH_POSTGRES_CONFIG: str = "english"
    # Dotted paths of tool provider hooks, callable(run, latest_user_message) -> tool names, that agents may
    # name in their tool_provider (progressive disclosure); the names they return are still filtered by grants.
    TOOL_PROVIDERS: list[str] = []
    # The beginnings a credential reference's variable name must have (model providers, remote MCP servers), e.g.
    # ["CRED_"]; empty: any name but the platform's own (toolhub.credential_env).
    CREDENTIAL_ENV_PREFIXES: list[str] = []
    # Seconds one call of a tool may run on a worker when the tool sets no ``timeout=``.
    DEFAULT_TOOL_TIMEOUT_SECONDS: Seconds = 300
    # Refuse to define a tool with a parameter that has no description (Param, Field or docstring).
    REQUIRE_PARAMETER_DESCRIPTIONS: bool = False
    # Progress updates kept per call (the newest), and the least seconds between two writes of them.
    PROGRESS_KEEP: Positive = 50
    PROGRESS_MIN_INTERVAL_SECONDS: SecondsOrZero = 0.5
    # Largest artifact a tool may store with a call; largest result an external system may post, a remote MCP
    # tool answer or a model's turn (64 times it read off the wire, ``toolhub.wire``); largest result (as JSON) a
    # tool run here may return (larger data goes in an artifact).
    MAX_ARTIFACT_BYTES: Positive = 10_000_000
    MAX_EXTERNAL_RESULT_BYTES: Positive = 1_000_000
    MAX_RESULT_BYTES: Positive = 1_000_000
    # Deepest nesting of lists and objects a JSON request body may have (tool arguments allow 100 inside it).
    MAX_REQUEST_NESTING: Positive = 200
    # Interceptors that see every call before policy and its result after execution (toolhub.interceptors):
    # dotted paths, or {"class": "<dotted path>", "options": {...}}; ``before`` in this order, ``after`` reversed.
    INTERCEPTORS: list[str | dict[str, Any]] = []
    # Built-in tools (app toolhub.builtins): the directory holding one workspace per tenant (<root>/<tenant slug>/;
    # empty: the file and shell tools refuse to run), the largest file they read or write, the most entries listed,
    # and what one tenant's workspace may hold once a file tool has written (bytes of its files; files, directories
    # and other entries).
    WORKSPACE_ROOT: str = ""
    BUILTIN_FILE_MAX_BYTES: Positive = 1_000_000
    BUILTIN_LIST_MAX_ENTRIES: Positive = 500
    BUILTIN_WORKSPACE_MAX_BYTES: Positive = 100_000_000
    BUILTIN_WORKSPACE_MAX_ENTRIES: Positive = 10_000
    # The shell tool's allow list: [{"command": "wc", "arguments": [r"-[lwc]", r"[\w.-]+"], "max_arguments": 5}];
    # each argument must match one pattern whole. Anything else waits for an operator's approval.
    SHELL_COMMANDS: list[dict[str, Any]] = []
    # Seconds a command may run (its process group is then killed; at most 290, the tool's own limit is 300),
    # bytes of stdout and of stderr kept (the rest is dropped, with a marker), and the PATH commands are found on.
    SHELL_TIMEOUT_SECONDS: Annotated[float, Field(gt=0, le=290)] = 30
    SHELL_OUTPUT_MAX_BYTES: Positive = 64_000
    SHELL_PATH: str = "/usr/local/bin:/usr/bin:/bin"
    # Context keys a client of the REST API or MCP (``_meta``) may set on its calls; the reserved ones (tenant,
    # user, run, call, idempotency key, ...) are always refused, whatever this list says.
    CLIENT_CONTEXT_KEYS: list[str] = ["correlation_id", "trace_id", "conversation_id", "locale", "timezone"]
    # Longest ``?wait=`` a client may ask of POST/GET /api/v1/calls/ (seconds); longer asks are cut to it.
    CALL_WAIT_MAX_SECONDS: Seconds = 30
    # Waits for a call one user may hold at once, ``?wait=`` requests (each holds a web worker and a database
    # connection) and MCP's (``toolhub_call_status``, a followed ``tools/call``) together; past it a wait answers at
    # once with the call as it is (toolhub.api.wait_slots).
    CALL_WAITS_PER_USER: Positive = 2
    # Seconds an MCP ``tools/call`` follows a queued or running call (sending progress) before it answers
    # with the call id to poll; a call waiting for approval answers at once.
    MCP_CALL_WAIT_SECONDS: SecondsOrZero = 20
    # Longest a console export streams without reading its reader's rights again (toolhub.rights_recheck): one
    # who lost them meanwhile (membership, permission, staff status, account) is cut off at the next chunk.
    STREAM_RIGHTS_RECHECK_SECONDS: SecondsOrZero = 5
    # What MCP ``tools/list`` shows: "all" (every tool the caller is granted) or "search" (only the always-visible
    # ones; the rest are found with toolhub_find_tools and called by name). Both add the four stable tools
    # (toolhub_call_status, toolhub_cancel_call, toolhub_find_tools, toolhub_describe_tool); neither lists
    # facades, their context tools or the meta tools.
    MCP_TOOL_LISTING: Literal["all", "search"] = "all"
    # Least seconds between two writes of a streaming model answer's text so far to its run.
    STREAM_FLUSH_SECONDS: Seconds = 0.5
    # Seconds an API token (REST and MCP) authenticates after it was created; None: tokens never expire.
    API_TOKEN_MAX_AGE_SECONDS: Seconds | None = 90 * 24 * 3600
    # Sagas: attempts of one compensation (each retry runs the same call again, so its idempotency key is
    # stable); seconds before the first retry, doubled for each further attempt; the longest wait between two.
    SAGA_MAX_ATTEMPTS: Positive = 5
    SAGA_RETRY_BASE_SECONDS: SecondsOrZero = 5.0
    SAGA_RETRY_MAX_SECONDS: SecondsOrZero = 600.0
    # Hours, from when it failed, the sagas sweep rolls back a direct step whose failure's notification was lost (one
    # found older is rolled back held, for an operator): handled failures stay in ``toolcall_failed_direct_step`` for
    # ever, and reading them all each tick grew without bound.
    SAGA_UNHEARD_FAILURE_HOURS: Positive = 7 * 24


#: Every key with its default (what ``settings.TOOLHUB`` may set), derived from ``ToolhubSettings``.
DEFAULTS: dict[str, Any] = {name: field.default for name, field in ToolhubSettings.model_fields.items()}

_lock = threading.Lock()
_current: ToolhubSettings | None = None


def toolhub_settings() -> ToolhubSettings:
    """The current settings, built and validated on first use; ``ImproperlyConfigured`` names a bad key."""
    global _current
    built = _current
    if built is None:
        with _lock:
            built = _current = _current or _build()
    return built


def toolhub_setting(name: str) -> Any:
    """One value by its key (alias of ``getattr(toolhub_settings(), name)``); ``KeyError`` for an unknown key."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown toolhub setting {name!r}; known: {', '.join(sorted(DEFAULTS))}")
    return getattr(toolhub_settings(), name)


def _build() -> ToolhubSettings:
    configured = getattr(settings, "TOOLHUB", None) or {}
    if not isinstance(configured, dict):
        raise ImproperlyConfigured(f"settings.TOOLHUB must be a dict, not {type(configured).__name__}.")
    values: dict[str, Any] = {}
    for name, field in ToolhubSettings.model_fields.items():
        raw = os.environ.get(f"TOOLHUB_{name}")
        if name in configured or raw is None or not isinstance(field.default, str | int | float | bool):
            continue
        try:
            values[name] = TypeAdapter(field.annotation).validate_strings(raw)
        except ValidationError as exc:
            raise ImproperlyConfigured(
                f"Environment variable TOOLHUB_{name}={raw[:100]!r}: {exc.errors()[0]['msg']}."
            ) from None
    values.update(configured)
    try:
        return ToolhubSettings.model_validate(values)
    except ValidationError as exc:
        raise ImproperlyConfigured(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    """One line per bad key: which, what is wrong, what was given (bounded)."""
    lines = []
    for error in exc.errors():
        key = str(error["loc"][0]) if error["loc"] else "?"
        if error["type"] == "extra_forbidden":
            lines.append(f"TOOLHUB[{key!r}] is not a toolhub setting; known: {', '.join(sorted(DEFAULTS))}.")
            continue
        shown = repr(error.get("input"))[:100]
        where = "".join(f"[{part!r}]" for part in error["loc"])
        lines.append(f"TOOLHUB{where}: {error['msg']} (got {shown}; default {DEFAULTS.get(key)!r}).")
    return "Invalid toolhub settings: " + " ".join(lines)


@receiver(setting_changed, dispatch_uid="toolhub.conf.settings_changed")
def _rebuild_on_change(setting: str, **kwargs: Any) -> None:
    global _current
    if setting == "TOOLHUB":
        with _lock:
            _current = None
