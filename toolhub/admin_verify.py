"""The console's "Verify now": a tenant's staff ask a worker to prove their tenant's own audit chains intact."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect

from toolhub.admin_back import form_page
from toolhub.audit_console import VERIFY_PERMISSION
from toolhub.audit_proof import REQUEST_INTERVAL_SECONDS, UnknownTenantError, audit_verification_request
from toolhub.tenancy import tenant_scope

__all__ = ["audit_verify_view"]


def audit_verify_view(request: HttpRequest) -> HttpResponse:
    """POST ``tenant``: queue a verification of that tenant's chains; the result shows beside the trail's status.

    A tenant outside the viewer's boundary answers 404, as one that does not exist (nothing is told of it).
    """
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not request.user.has_perm(VERIFY_PERMISSION):
        raise PermissionDenied
    tenant = request.POST.get("tenant", "")
    if not tenant_scope(request.user).allows(tenant):
        raise Http404("No such tenant.")
    try:
        queued = audit_verification_request(tenant=tenant)
    except UnknownTenantError:
        raise Http404("No such tenant.") from None
    if queued:
        messages.success(
            request,
            f"A worker is verifying {tenant}'s own audit chains; the result shows beside the trail's status "
            "when it is done (reload the page).",
        )
    else:
        messages.warning(
            request,
            f"A verification of {tenant}'s chains was asked for less than {REQUEST_INTERVAL_SECONDS} seconds ago; "
            "its result shows beside the trail's status when it is done.",
        )
    return redirect(form_page(request))
