"""Versions of the arguments under approval: what is shown of them, and how one differs from another.

A request holds the model's original arguments and the version under approval (what runs once it is
approved). Every edit makes a new version and opens a new round; approvals count within one round.
Sensitive values are never part of anything this module returns.
"""

from collections.abc import Mapping
from typing import Any

from approvals.models import ApprovalRequest
from toolhub.audit import arguments_diff as _arguments_diff
from toolhub.audit import redact
from toolhub.selectors import withheld_names

__all__ = ["arguments_diff", "shown_arguments", "shown_original_arguments", "shown_diff"]


def arguments_diff(
    tool_name: str, before: Mapping[str, Any], after: Mapping[str, Any], *, version: str | None = None
) -> dict[str, Any]:
    """``{name: {"before": ..., "after": ...}}`` for every argument that differs; sensitive values redacted."""
    return _arguments_diff(before, after, withheld_names(tool_name, before, after, version=version))


def shown_arguments(request: ApprovalRequest) -> dict[str, Any]:
    """The version under approval (what will run), as anyone may see it."""
    arguments = request.arguments or {}
    return redact(arguments, withheld_names(request.tool_name, arguments, version=request.call.tool_version))


def shown_original_arguments(request: ApprovalRequest) -> dict[str, Any]:
    """The arguments as the model sent them, as anyone may see them."""
    arguments = request.original_arguments or {}
    return redact(arguments, withheld_names(request.tool_name, arguments, version=request.call.tool_version))


def shown_diff(request: ApprovalRequest) -> dict[str, Any]:
    """How the version under approval differs from the model's original (empty when nobody edited it)."""
    return arguments_diff(
        request.tool_name,
        request.original_arguments or {},
        request.arguments or {},
        version=request.call.tool_version,
    )
