"""The console's "Export trail": a tenant's own audit chains as a file that verifies offline.

Whoever may read the audit trail (``toolhub.view_auditevent``) exports a tenant within their boundary;
platform auditors (who cross it) type any tenant, and one that does not exist is said so on the page they typed
it on. A tenant outside the boundary answers 404, as one that does not exist. The export's start is recorded in
the tenant's chain before it streams, and its outcome when the download ends: ``audit.exported`` once the last
line was handed over, ``audit.export_failed`` when it was cut off.
"""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseBadRequest, HttpResponseNotAllowed
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.http import content_disposition_header

from toolhub.admin_back import form_page
from toolhub.audit_export import (
    AuditExportError,
    UnknownTenantError,
    audit_export_open,
    audit_export_start,
    export_range,
)
from toolhub.downloads import StreamedResponse, download_filename
from toolhub.rights_recheck import console_reader_allowed, while_permitted
from toolhub.tenancy import TenantScope, tenant_scope

__all__ = ["EXPORT_PERMISSION", "audit_export_view"]

#: Who may take a tenant's trail away: those who read it on the audit page.
EXPORT_PERMISSION = "toolhub.view_auditevent"


def audit_export_view(request: HttpRequest) -> HttpResponseBase:
    """POST ``tenant`` (and optionally ``from_seq``/``to_seq`` or ``since``/``until``): stream the export.

    A POST with the CSRF token: each export is audited in the user's name, so another site must not be able to
    make their browser export.
    """
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"], "Export with the button of the audit page.")
    if not request.user.has_perm(EXPORT_PERMISSION):
        raise PermissionDenied
    tenant = request.POST.get("tenant", "").strip()
    viewer_scope = tenant_scope(request.user)
    if not viewer_scope.allows(tenant):
        raise Http404("No such tenant.")
    try:
        scope = export_range(
            from_seq=request.POST.get("from_seq"),
            to_seq=request.POST.get("to_seq"),
            since=request.POST.get("since"),
            until=request.POST.get("until"),
        )
        audit_export_open(tenant, scope)
    except UnknownTenantError:
        if viewer_scope.everything:  # they typed it, and may know every tenant: say so where they typed it
            messages.error(request, f"No tenant named {tenant!r}: nothing was exported.")
            return redirect(form_page(request))
        raise Http404("No such tenant.") from None
    except AuditExportError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    record = audit_export_start(actor=f"user:{request.user.get_username()}", tenant=tenant, scope=scope)
    try:
        export = audit_export_open(tenant, scope)
    except BaseException as exc:
        record.fail(f"the export could not be read ({type(exc).__name__})")
        raise
    allowed = console_reader_allowed(request.user, TenantScope(False, frozenset({tenant})), EXPORT_PERMISSION)
    lines = while_permitted(record.stream(export, complete_when_read=True), request.user, allowed)
    response = StreamedResponse(lines, content_type="application/x-ndjson")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    name = download_filename(f"audit-{tenant}-{stamp}.jsonl", default="audit-export.jsonl")
    response["Content-Disposition"] = content_disposition_header(True, name) or "attachment"
    response["X-Content-Type-Options"] = "nosniff"
    return response
