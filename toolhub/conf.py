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
    # Optional URL that receives approval notifications (JSON, HMAC-signed with the key below).
    "WEBHOOK_URL": "",
    "WEBHOOK_SECRET_ENV": "TOOLHUB_WEBHOOK_SECRET",
    "WEBHOOK_MAX_ATTEMPTS": 6,
    # Seconds a pending approval waits before it escalates to the fallback group (when one is set).
    "ESCALATE_AFTER_SECONDS": 3600,
    # How many close names to suggest for an unknown tool.
    "UNKNOWN_TOOL_SUGGESTIONS": 3,
}


def toolhub_setting(name: str) -> Any:
    """Return ``settings.TOOLHUB[name]``, falling back to the documented default."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown toolhub setting {name!r}; known: {', '.join(sorted(DEFAULTS))}")
    return getattr(settings, "TOOLHUB", {}).get(name, DEFAULTS[name])
