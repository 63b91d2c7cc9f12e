"""toolhub's tunables: one ``TOOLHUB`` settings dict, read through one accessor with defaults."""

from typing import Any

from django.conf import settings

__all__ = ["DEFAULTS", "toolhub_setting"]

DEFAULTS: dict[str, Any] = {
    # Longest string the model may pass in any argument; longer ones are rejected before anything runs.
    "MAX_STRING_LENGTH": 10_000,
    # Largest serialized argument payload, in bytes.
    "MAX_ARGUMENTS_BYTES": 100_000,
    # Default per-run budget of tool calls when an agent does not set one.
    "DEFAULT_MAX_TOOL_CALLS": 10,
    # Seconds a worker holds a claimed call before the reconciler may take it back.
    "CALL_LEASE_SECONDS": 300,
    # Seconds a queued call may wait for its broker message before the sweeper re-dispatches it.
    "REDISPATCH_AFTER_SECONDS": 60,
    # Seconds a call of an external (schema-only) tool waits for its result before it expires.
    "EXTERNAL_RESULT_TIMEOUT_SECONDS": 24 * 3600,
    # Seconds an approval request stays open before it expires.
    "APPROVAL_TIMEOUT_SECONDS": 24 * 3600,
    # Number of independent audit hash chains (shards); appends to one chain are serialized.
    "AUDIT_CHAINS": 8,
    # Dotted path of ``callable(exc) -> str`` that turns an execution error into the model's message.
    "ERROR_HANDLER": "",
    # Whether a user may call a tool no grant mentions: "deny" (grants required) or "allow".
    "DEFAULT_TOOL_ACCESS": "deny",
    # Audit checkpoints are signed with the key in this environment variable (never in the database).
    "AUDIT_KEY_ENV": "TOOLHUB_AUDIT_KEY",
    # Seconds between two signed checkpoints written by beat. Beat reads it once, when it starts, from the
    # environment variable TOOLHUB_AUDIT_CHECKPOINT_SECONDS or this default (CELERY_BEAT_SCHEDULE in
    # toolhub/settings.py); a settings module of your own sets that schedule entry instead.
    "AUDIT_CHECKPOINT_SECONDS": 300,
    # Optional directory that receives a copy of every stored checkpoint (e.g. storage the database's
    # owner cannot write); verify_audit checks the newest file there too.
    "AUDIT_CHECKPOINT_DIR": "",
    # The database role the web and workers connect with (``manage.py toolhub_db_roles`` creates it), and
    # the environment variable holding its password.
    "DB_APP_ROLE": "toolhub_app",
    "DB_APP_PASSWORD_ENV": "TOOLHUB_DB_APP_PASSWORD",
    # Optional URL that receives approval notifications (JSON, HMAC-signed with the key below).
    "WEBHOOK_URL": "",
    "WEBHOOK_SECRET_ENV": "TOOLHUB_WEBHOOK_SECRET",
    "WEBHOOK_MAX_ATTEMPTS": 6,
    # Seconds a pending approval waits before it escalates to the fallback group (when one is set).
    "ESCALATE_AFTER_SECONDS": 3600,
    # How many close names to suggest for an unknown tool.
    "UNKNOWN_TOOL_SUGGESTIONS": 3,
    # Dotted path of ``callable(name, available_names) -> str``: what the model is told for an unknown tool.
    "UNKNOWN_TOOL_HANDLER": "",
    # Dotted path of ``callable(tool_name, errors) -> str``: what the model is told for arguments that fail the
    # tool's schema; ``errors`` is a list of {"loc", "msg", "type"} (never the values). Bounded like the default.
    "ARGUMENT_ERROR_HANDLER": "",
    # What the model reads when a tool returns None (it succeeded with nothing to say).
    "NONE_RESULT_TEXT": "Done.",
    # The tool-search provider: a name in toolhub.search.base.PROVIDERS or a dotted path to a factory.
    "TOOL_SEARCH_PROVIDER": "lexical",
    # PostgreSQL text search configuration the "postgres" provider stems and drops stop words with.
    "TOOL_SEARCH_POSTGRES_CONFIG": "english",
    # Dotted paths of tool provider hooks, callable(run, latest_user_message) -> tool names, that agents may
    # name in their tool_provider (progressive disclosure); the names they return are still filtered by grants.
    "TOOL_PROVIDERS": [],
    # Seconds one call of a tool may run on a worker when the tool sets no ``timeout=``.
    "DEFAULT_TOOL_TIMEOUT_SECONDS": 300,
    # Refuse to define a tool with a parameter that has no description (Param, Field or docstring).
    "REQUIRE_PARAMETER_DESCRIPTIONS": False,
    # Progress updates kept per call (the newest), and the least seconds between two writes of them.
    "PROGRESS_KEEP": 50,
    "PROGRESS_MIN_INTERVAL_SECONDS": 0.5,
    # Largest artifact a tool may store with a call, and largest result an external system may post.
    "MAX_ARTIFACT_BYTES": 10_000_000,
    "MAX_EXTERNAL_RESULT_BYTES": 1_000_000,
    # Deepest nesting of lists and objects a JSON request body may have (tool arguments allow 100 inside it).
    "MAX_REQUEST_NESTING": 200,
    # Interceptors that see every call before policy and its result after execution (toolhub.interceptors):
    # dotted paths, or {"class": "<dotted path>", "options": {...}}; ``before`` in this order, ``after`` reversed.
    "INTERCEPTORS": [],
    # Built-in tools (app toolhub.builtins): the directory holding one workspace per tenant (<root>/<tenant slug>/;
    # empty: the file and shell tools refuse to run), the largest file they read or write, the most entries listed.
    "WORKSPACE_ROOT": "",
    "BUILTIN_FILE_MAX_BYTES": 1_000_000,
    "BUILTIN_LIST_MAX_ENTRIES": 500,
    # The shell tool's allow list: [{"command": "wc", "arguments": [r"-[lwc]", r"[\w.-]+"], "max_arguments": 5}];
    # each argument must match one pattern whole. Anything else waits for an operator's approval.
    "SHELL_COMMANDS": [],
    # Seconds a command may run (its process group is then killed; at most 290, the tool's own limit is 300),
    # bytes of stdout and of stderr kept (the rest is dropped, with a marker), and the PATH commands are found on.
    "SHELL_TIMEOUT_SECONDS": 30,
    "SHELL_OUTPUT_MAX_BYTES": 64_000,
    "SHELL_PATH": "/usr/local/bin:/usr/bin:/bin",
}


def toolhub_setting(name: str) -> Any:
    """Return ``settings.TOOLHUB[name]``, falling back to the documented default."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown toolhub setting {name!r}; known: {', '.join(sorted(DEFAULTS))}")
    return getattr(settings, "TOOLHUB", {}).get(name, DEFAULTS[name])
