"""Reads of approval requests."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from approvals.models import ApprovalRequest
from approvals.services import DECIDE_PERMISSION
from toolhub.tenancy import has_tenant_wide_role, visible_rows

__all__ = ["approval_requests_visible_to"]


def approval_requests_visible_to(user: AbstractBaseUser) -> QuerySet[ApprovalRequest]:
    """Operators (and other staff) see every request of their tenants; anyone else only those of their own calls."""
    requests = ApprovalRequest.objects.select_related("call", "requested_by").prefetch_related("decisions")
    return visible_rows(
        requests, user, tenant_wide=has_tenant_wide_role(user, DECIDE_PERMISSION), owner_field="requested_by"
    )
