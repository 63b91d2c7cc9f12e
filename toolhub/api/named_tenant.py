"""The tenant a REST request names (``?tenant=``, ``X-Toolhub-Tenant``, a write's body): read alike by every view.

Every request is checked (``NamesOneOfTheirTenants``, a default permission): a tenant named by ``?tenant=`` or the
header that the caller is no member of is refused before the view runs, reads and writes alike, with the text a
write gives (nothing read, nothing run); two places naming different tenants are refused. A list shows only the rows
of the tenant named (``NamedTenantFilter``, a default filter backend); a row named by its id is acted on in its own
tenant (a saga's id, per tenant, is looked up in the one named: ``toolhub.sagas.api.visible_saga``). The OpenAPI
document says so on every operation of a view that reads them (``named_tenant_parameters``, ``toolhub.api.schema``).
"""

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework.filters import BaseFilterBackend
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from toolhub.direct import TENANT_HEADER, CallerContextError, not_a_member, tenant_named
from toolhub.tenancy import tenant_scope

__all__ = [
    "NamedTenantFilter",
    "NamesOneOfTheirTenants",
    "named_tenant_parameters",
    "reads_named_tenant",
    "request_tenant_named",
]

_REFUSED = (
    "another is refused (400), as are ?tenant= and the header naming different tenants; an empty value names nothing."
)
_LISTED = "One of your tenants' slugs: the list shows what is in it (an agent list keeps the global agents); "
_ACTED_IN = (
    "One of your tenants' slugs: where the operation takes a tenant (a row it makes, a saga id's tenant, the tools "
    "exported) it is this one; elsewhere it is only checked (a row named by its id is read in its own tenant): "
)


def request_tenant_named(request: Request, body: object = None) -> str | None:
    """The tenant a REST request names (``tenant_named``): ``body``'s, ``?tenant=`` or ``X-Toolhub-Tenant``."""
    query = ", ".join(request.query_params.getlist("tenant")) or None
    return tenant_named(body=body, query=query, header=request.headers.get(TENANT_HEADER))


def named_tenant_parameters(*, listing: bool) -> list[OpenApiParameter]:
    """``?tenant=`` and ``X-Toolhub-Tenant``, as an operation reads them: a list filters by them, others act in them."""
    description = (_LISTED if listing else _ACTED_IN) + _REFUSED
    return [
        OpenApiParameter("tenant", str, OpenApiParameter.QUERY, description=description),
        OpenApiParameter(TENANT_HEADER, str, OpenApiParameter.HEADER, description=description),
    ]


def reads_named_tenant(view: Any) -> bool:
    """Whether ``view`` checks the tenant a request names (``NamesOneOfTheirTenants`` among its permissions)."""
    return any(issubclass(permission, NamesOneOfTheirTenants) for permission in getattr(view, "permission_classes", []))


class NamesOneOfTheirTenants(BasePermission):
    """A tenant named by ``?tenant=`` or ``X-Toolhub-Tenant`` is one of the caller's, on every request (else 400).

    Reads and writes by id read it too: one that let it pass showed a caller naming a tenant they are not in their
    own tenant's rows, or acted there, as if the name were heard.
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return True  # IsAuthenticated (or the view's own permission) answers
        named = request_tenant_named(request)
        if named is not None and not tenant_scope(user).allows(named):
            raise CallerContextError(not_a_member(named))
        return True


class NamedTenantFilter(BaseFilterBackend):
    """A list's rows in the tenant the request names (``?tenant=`` or the header), with the global ones it holds.

    A list of rows named by an id in the URL (a retrieve) is left alone: the row is read in its own tenant.
    """

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> QuerySet[Any]:
        lookup = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None)
        if lookup in getattr(view, "kwargs", {}):
            return queryset
        named = request_tenant_named(request)
        if named is None:
            return queryset
        try:
            field = queryset.model._meta.get_field("tenant")
        except FieldDoesNotExist:
            return queryset
        if not field.is_relation:
            return queryset.filter(tenant=named)
        # A row of no tenant (a global agent) is one every tenant's members use: listed in each.
        return queryset.filter(Q(tenant__slug=named) | Q(tenant__isnull=True) if field.null else Q(tenant__slug=named))
