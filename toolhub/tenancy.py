"""The tenant boundary: which tenants a person acts for, and querysets cut down to them.

Every selector, API view, admin queryset and action, and service that reads or acts on tenant data
goes through :func:`tenant_scope`. Being staff or holding an operator's permission never widens it:
only a superuser or the explicit ``toolhub.cross_tenant`` permission (for a platform team) crosses
it. Rows of another tenant are filtered out, never refused with a different answer, so that an id
of another tenant answers exactly like a missing one (404).

Rows with an empty tenant belong to nobody's tenant (calls of a user without a tenant, global
records); only people who cross the boundary see them, besides their owner where a selector says so.
"""

import functools
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, Q, QuerySet

from toolhub.credentials import CredentialRow, credential_console, credential_rows, password_fingerprint
from toolhub.exceptions import NotInTenantError
from toolhub.prepared import prepared_cursor

__all__ = [
    "CROSS_TENANT_PERMISSION",
    "TenantScope",
    "NotInTenantError",
    "tenant_scope",
    "scoped",
    "tenant_scope_now",
    "require_tenant",
    "has_tenant_wide_role",
    "visible_rows",
]

#: The one permission besides superuser status that lets a person see and act on every tenant.
CROSS_TENANT_PERMISSION = "toolhub.cross_tenant"

_CACHE_ATTRIBUTE = "_toolhub_tenant_scope"

#: What Django's auth backend memoizes on a user object (``ModelBackend.get_all_permissions`` and friends).
_PERMISSION_CACHES = ("_perm_cache", "_user_perm_cache", "_group_perm_cache")

#: The user's columns that decide what they may see: re-read after a wait.
_RIGHTS_FIELDS = frozenset({"is_active", "is_staff", "is_superuser"})

#: A credential's bound (``CredentialRow.bound_lookup``) as SQL.
_BOUND_OPERATORS = {"gte": ">=", "gt": ">"}

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class TenantScope:
    """The tenants one person may see and act on; ``everything`` for superusers and the cross-tenant permission."""

    everything: bool
    tenants: frozenset[str]

    def allows(self, tenant: str | None) -> bool:
        """Whether a row of ``tenant`` (a slug; empty for none) is inside the boundary."""
        return self.everything or (bool(tenant) and tenant in self.tenants)

    def q(self, field: str = "tenant") -> Q:
        """A filter that keeps rows whose ``field`` (a tenant slug, or a path to one) is inside the boundary."""
        if self.everything:
            return Q()
        if not self.tenants:
            return Q(pk__in=[])
        return Q(**{f"{field}__in": sorted(self.tenants)})

    def filter(self, queryset: QuerySet[M], field: str = "tenant") -> QuerySet[M]:
        """``queryset`` cut down to the rows inside the boundary."""
        if self.everything:
            return queryset
        return queryset.filter(self.q(field))


_NOBODY = TenantScope(everything=False, tenants=frozenset())


def tenant_scope(user: Any) -> TenantScope:
    """The tenants ``user`` may see and act on (memoized on the user object for the request)."""
    if user is None or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", True):
        return _NOBODY
    cached = getattr(user, _CACHE_ATTRIBUTE, None)
    if cached is not None:
        return cached
    from toolhub.models import TenantMembership

    if user.is_superuser or user.has_perm(CROSS_TENANT_PERMISSION):
        scope = TenantScope(everything=True, tenants=frozenset())
    else:
        slugs = TenantMembership.objects.filter(user_id=user.pk).values_list("tenant__slug", flat=True)
        scope = TenantScope(everything=False, tenants=frozenset(slugs))
    setattr(user, _CACHE_ATTRIBUTE, scope)
    return scope


def tenant_scope_now(user: Any) -> TenantScope:
    """``tenant_scope`` read again from the database, for an answer given after a wait in the same request.

    The memo holds for one request; a request that followed a call for seconds (``?wait=``, MCP) may outlive a
    membership, and the rights the scope and a row's visibility rest on (``is_active``, ``is_staff``,
    ``is_superuser``, permissions) may be revoked meanwhile: the user's row is read again and the auth backend's
    permission caches dropped, so what the request answers afterwards is asked of the rights as they are now. The
    credential the request came with is asked too (``toolhub.credentials``): revoked meanwhile (a key deleted, a
    password reset ending keys and sessions), or its account's password written since it authenticated, or a
    session's account no longer staff (even by ``QuerySet.update``: no signal), the user reads as inactive, answered
    nothing.
    """
    if user is not None and getattr(user, "is_authenticated", False):
        _reload_rights(user)
    return tenant_scope(user)


def _reload_rights(user: Any) -> None:
    """Refresh ``user``'s status flags from its row and forget every right memoized on it; a deleted user is nobody."""
    for attribute in (_CACHE_ATTRIBUTE, *_PERMISSION_CACHES):
        if hasattr(user, attribute):
            delattr(user, attribute)
    fields = tuple(field.attname for field in user._meta.concrete_fields if field.name in _RIGHTS_FIELDS)
    # The credential the request came with, asked in the same statement when it is a row (``toolhub.credentials``).
    held = credential_rows(user)
    row_of = held if isinstance(held, CredentialRow) else None
    alias = user._state.db or DEFAULT_DB_ALIAS
    connection = connections[alias]
    shape = None
    if row_of is not None:
        bound = (row_of.bound_field, row_of.bound_lookup) if row_of.at_least is not None else None
        shape = (row_of.model, row_of.field, bound, row_of.fingerprint)
    params = []
    if row_of is not None:
        meta = row_of.model._meta
        params.append(meta.get_field(row_of.field).get_db_prep_value(row_of.value, connection))
        if row_of.at_least is not None:
            params.append(meta.get_field(row_of.bound_field).get_db_prep_value(row_of.at_least, connection))
    params.append(user._meta.pk.get_db_prep_value(user.pk, connection))
    with prepared_cursor(connection) as cursor:
        cursor.execute(_rights_sql(alias, user._meta.model, fields, shape, marked=held is not None), params)
        row = cursor.fetchone()
    if row is None:
        user.is_active = False
        return
    for attname, value in zip(fields, row, strict=False):
        setattr(user, attname, bool(value))  # the rights' columns are booleans (0/1 on SQLite)
    holds = bool(row[-1]) if row_of is not None else held is None or bool(held)
    if held is not None:
        # Bound to the password now (its binding's, read), else issued under the one the request authenticated with
        # (its object's); and a session for staff only.
        password = password_fingerprint(row[len(fields)])
        if row_of is not None and row_of.fingerprint is not None:
            holds = row[-1] is not None and row[-1] == password
        else:
            holds = holds and password == password_fingerprint(getattr(user, "password", None))
        holds = holds and (user.is_staff or not credential_console(user))
    if user.is_active and not holds:
        # The key or session the request came with was revoked meanwhile: no one now.
        user.is_active = False


@functools.cache
def _rights_sql(
    alias: str,
    model: type[Model],
    fields: tuple[str, ...],
    shape: tuple[Any, str, tuple[str, str] | None, tuple[Any, str] | None] | None,
    *,
    marked: bool = False,
) -> str:
    """The user's rights columns, its password's when a credential ``marked`` it, and the credential's EXISTS.

    The EXISTS given the credential's ``shape`` (model, key, bound, lookup, fingerprint); with a fingerprint, the
    fingerprint its row is bound to instead (``NULL``: no such row).
    """
    q = connections[alias].ops.quote_name
    meta = model._meta
    columns = [f"u.{q(meta.get_field(name).column)}" for name in fields]
    if marked:
        columns.append(f"u.{q(meta.get_field('password').column)}")
    if shape is not None:
        credential, field, bound, fingerprint = shape
        table = credential._meta
        where = f"c.{q(table.get_field(field).column)} = %s"
        if bound is not None:
            bound_field, lookup = bound
            where += f" AND c.{q(table.get_field(bound_field).column)} {_BOUND_OPERATORS[lookup]} %s"
        if fingerprint is None:
            columns.append(f"EXISTS (SELECT 1 FROM {q(table.db_table)} c WHERE {where})")
        else:
            binding, bound_to = fingerprint[0]._meta, fingerprint[1]
            columns.append(
                f"(SELECT b.{q(binding.get_field(bound_to).column)} FROM {q(table.db_table)} c "
                f"JOIN {q(binding.db_table)} b ON b.{q(binding.pk.column)} = c.{q(table.pk.column)} WHERE {where})"
            )
    return f"SELECT {', '.join(columns)} FROM {q(meta.db_table)} u WHERE u.{q(meta.pk.column)} = %s"


def scoped(queryset: QuerySet[M], user: Any, field: str = "tenant") -> QuerySet[M]:
    """``queryset`` cut down to the tenants ``user`` may see; ``field`` names the tenant slug (or a path to it)."""
    return tenant_scope(user).filter(queryset, field)


def require_tenant(user: Any, tenant: str | None) -> None:
    """Refuse, as if the row did not exist, a person acting on a row of a tenant they are not in."""
    if not tenant_scope(user).allows(tenant):
        raise NotInTenantError("No such record among your tenants.")


def has_tenant_wide_role(user: Any, *permissions: str) -> bool:
    """Whether ``user`` reads every row of their tenants (staff: operators, auditors; or one of ``permissions``).

    Everyone else reads only their own rows. Either way the tenant boundary still applies.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    return bool(getattr(user, "is_staff", False)) or any(user.has_perm(permission) for permission in permissions)


def visible_rows(
    queryset: QuerySet[M],
    user: Any,
    *,
    tenant_wide: bool,
    field: str = "tenant",
    owner_field: str = "user",
) -> QuerySet[M]:
    """The rows of ``queryset`` that ``user`` may read.

    People who cross the boundary read everything; with a tenant-wide role, every row of one's
    tenants; otherwise one's own rows (``owner_field``), inside one's tenants or bound to no tenant
    (a user without a tenant still sees their own calls), never a tenant one has left. An inactive account (one
    deactivated during a wait, read again by ``tenant_scope_now``) reads nothing, its own rows included.
    """
    scope = tenant_scope(user)
    if scope.everything:
        return queryset
    if user is None or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", True):
        return queryset.none()
    if tenant_wide:
        return queryset.filter(scope.q(field))
    inside = Q(**{f"{field}__in": sorted(scope.tenants)}) | Q(**{field: ""})
    return queryset.filter(Q(**{f"{owner_field}_id": user.pk}) & inside)
