"""The API's answer to toolhub's errors: one DRF exception handler instead of mappings in each view.

Registered as ``REST_FRAMEWORK["EXCEPTION_HANDLER"]``. A ``ToolhubError`` answers its class's
``status_code`` with ``{"detail": message}`` (plus ``{field: [message]}`` when the class names a
request field); a ``NotInTenantError`` answers exactly like a missing row of the view's model, so
another tenant's row cannot be told from no row. Everything else goes to DRF's own handler.
"""

from typing import Any

from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

from toolhub.exceptions import NotInTenantError, ToolhubError

__all__ = ["toolhub_exception_handler", "error_body"]


def toolhub_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's ``EXCEPTION_HANDLER``: toolhub's errors by their declared status, the rest as DRF does."""
    if isinstance(exc, NotInTenantError):
        return exception_handler(NotFound(_missing_row_message(context.get("view"))), context)
    if isinstance(exc, ToolhubError):
        set_rollback()  # like DRF's own errors: a request's atomic block does not commit half of it
        return Response(error_body(exc), status=exc.status_code)
    return exception_handler(exc, context)


def error_body(exc: ToolhubError) -> dict[str, Any]:
    """``{"detail": message}``, and ``{field: [message]}`` too when the error belongs to one field."""
    body: dict[str, Any] = {"detail": str(exc)}
    if exc.field:
        body[exc.field] = [str(exc)]
    return body


def _missing_row_message(view: Any) -> str:
    """What ``get_object_or_404`` says for a missing row of the view's model (``not_found_model`` or its queryset's)."""
    model = getattr(view, "not_found_model", None)
    if model is None:
        queryset = getattr(view, "queryset", None)
        model = getattr(queryset, "model", None)
    return (
        f"No {model._meta.object_name} matches the given query." if model is not None else str(NotFound.default_detail)
    )
