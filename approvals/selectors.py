"""Reads of approval requests."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from approvals.models import ApprovalRequest
from approvals.services import DECIDE_PERMISSION

__all__ = ["approval_requests_visible_to"]


def approval_requests_visible_to(user: AbstractBaseUser) -> QuerySet[ApprovalRequest]:
    """Operators (and other staff) see every request; anyone else only those of their own calls."""
    requests = ApprovalRequest.objects.select_related("call", "requested_by").prefetch_related("decisions")
    if getattr(user, "is_staff", False) or user.has_perm(DECIDE_PERMISSION):
        return requests
    return requests.filter(requested_by_id=user.pk)
