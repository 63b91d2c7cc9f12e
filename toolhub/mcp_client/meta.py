"""The context at the boundary (Embabel's ``McpMetaConverter``): which ``ToolContext`` keys reach a server as ``_meta``.

Reserved keys (tenant, user, run and call ids) and anything that looks like a secret never pass,
whatever the server's mode: the remote server is outside toolhub's trust boundary.
"""

import re
from collections.abc import Iterable, Mapping
from typing import Any

from toolhub.tools.context import RESERVED_CONTEXT_KEYS

__all__ = ["meta_for_server", "never_forwarded"]

_SECRET_LOOKING = re.compile(r"secret|password|passwd|token|api[_-]?key|credential|authorization|cookie", re.I)


def never_forwarded(key: str) -> bool:
    """Keys no server ever receives: the boundary's reserved keys and secret-looking ones."""
    return key in RESERVED_CONTEXT_KEYS or bool(_SECRET_LOOKING.search(key)) or "/" in key


def meta_for_server(context: Mapping[str, Any], *, mode: str, keys: Iterable[str]) -> dict[str, Any]:
    """The ``_meta`` sent with a call: ``none``, ``pass_through``, ``allow`` (only ``keys``), ``deny`` (all but)."""
    listed = set(keys)
    if mode == "pass_through":
        wanted = dict(context)
    elif mode == "allow":
        wanted = {key: value for key, value in context.items() if key in listed}
    elif mode == "deny":
        wanted = {key: value for key, value in context.items() if key not in listed}
    else:
        return {}
    return {key: value for key, value in wanted.items() if not never_forwarded(key) and _plain(value)}


def _plain(value: Any) -> bool:
    """Only JSON scalars and lists/dicts of them pass (no objects that could carry secrets or fail to encode)."""
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False
