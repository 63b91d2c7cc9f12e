"""Absolute links to the console's pages, the same whether written in a request or in a worker.

Served below a prefix (``uvicorn --root-path``, WSGI's ``SCRIPT_NAME``), Django's ``reverse`` puts the prefix in
front of a path while it answers a request (the handler sets the script prefix) and not in a worker or a command,
which have no request. A link joined from ``TOOLHUB["CONSOLE_URL"]`` and ``reverse`` therefore held the prefix twice
when written in a request (the embedded mode runs its tasks there) or not at all in a worker. ``CONSOLE_URL`` is the
console's address as people reach it, prefix included; a link is it and the page's path below the script prefix.
"""

from typing import Any

from django.urls import get_script_prefix, reverse

from toolhub.conf import toolhub_settings

__all__ = ["console_link"]


def console_link(viewname: str, *, args: list[Any] | None = None) -> str:
    """``CONSOLE_URL`` + the path of ``viewname`` below the script prefix (a path from the root without it)."""
    below = reverse(viewname, args=args).removeprefix(get_script_prefix())
    return f"{toolhub_settings().CONSOLE_URL.rstrip('/')}/{below}"
