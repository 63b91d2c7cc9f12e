"""Capabilities: a tool group's ``capabilities`` each name a permission its tools' callers must hold.

Capability ``money_movement`` is the permission ``toolhub.capability_money_movement`` (a row on the
``ToolGroup`` content type, created when a group naming it is saved); administrators give it to
users or Django groups. It is checked with the grants wherever they are: when tools are listed, when a
call is requested and again on the worker that runs it.
"""

import re
from collections.abc import Iterable

from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType

__all__ = ["capability_permission", "capability_name_problem", "capability_permissions_ensure"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,80}$")


def capability_permission(capability: str) -> str:
    """The permission (``app_label.codename``) that holds ``capability``."""
    return f"toolhub.capability_{capability}"


def capability_name_problem(capabilities: object) -> str | None:
    """Why ``capabilities`` is not a list of capability names (``None``: it is)."""
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        return 'Capabilities are a JSON list of names, e.g. ["money_movement"].'
    bad = [c for c in capabilities if not _NAME.fullmatch(c)]
    if bad:
        return f"Capability {bad[0][:100]!r}: use lowercase letters, digits and '_' (e.g. money_movement)."
    return None


def capability_permissions_ensure(capabilities: Iterable[str]) -> list[Permission]:
    """Create the permission of each capability that has none yet, so administrators can grant it."""
    from toolhub.models import ToolGroup

    content_type = ContentType.objects.get_for_model(ToolGroup)
    permissions = []
    for capability in capabilities:
        permission, _ = Permission.objects.get_or_create(
            content_type=content_type,
            codename=f"capability_{capability}",
            defaults={"name": f"Has capability {capability}"[:255]},
        )
        permissions.append(permission)
    return permissions
