"""A tools.py that names a context class bare in a tool, and registers the class only after the tool."""

import dataclasses

from toolhub import register_context_type, tool


@dataclasses.dataclass(frozen=True)
class TenantUser:
    user_id: str


@tool
def whoami(user: TenantUser) -> str:
    """Say who the user is."""
    return user.user_id


register_context_type(TenantUser)
