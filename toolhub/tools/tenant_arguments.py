"""Which argument names designate a tenant, however a tool spells them.

The tenant check (``toolhub.authorization.tenant_argument_denial``) reads the arguments as they are
validated and stored: for an input model, under each field's alias. So a name counts whatever its case
and separators (``tenantId``, ``TenantSlug``, ``tenant-id``: every alias generator pydantic ships), and
an input model may not store a field named as one under an alias the check would not recognise.
"""

import re

__all__ = ["TENANT_ARGUMENT_NAMES", "is_tenant_argument"]

#: Argument names that designate a tenant; the model may only ever name the principal's own.
TENANT_ARGUMENT_NAMES = frozenset({"tenant", "tenant_id", "tenant_slug"})

_SPELLINGS = frozenset(re.sub(r"[^a-z0-9]", "", name) for name in TENANT_ARGUMENT_NAMES)


def is_tenant_argument(name: str) -> bool:
    """Whether ``name`` is a spelling of a tenant argument's name (case and separators ignored)."""
    return re.sub(r"[^a-z0-9]", "", name.casefold()) in _SPELLINGS
