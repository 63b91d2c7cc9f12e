"""The OpenAPI document's account of refusals: every operation lists the error statuses it can answer, in one shape.

drf-spectacular documents only the success an operation declares, so a generated client met every 400,
403, 404 and 429 as an undocumented status with no body to read. ``ToolhubAutoSchema`` (the project's
``DEFAULT_SCHEMA_CLASS``) adds the ones every view can answer, read off the operation itself; a view
declares the ones only it answers (a conflict, ``CONFLICT``) in its ``extend_schema(responses=...)``. Every
operation of a view that reads ``?tenant=`` and ``X-Toolhub-Tenant`` documents both (``toolhub.api.named_tenant``).
"""

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS

__all__ = ["CONFLICT", "ErrorSerializer", "ToolhubAutoSchema"]


class ErrorSerializer(serializers.Serializer):
    """Why nothing (or not what was asked) was done: ``detail``, and per request field ``{field: [message]}``.

    A refused governed call (``POST /api/v1/calls/``) answers the call's own fields beside ``detail``.
    """

    detail = serializers.CharField(
        required=False, help_text="What went wrong; a request's field errors may come instead, keyed by field."
    )


#: A 409 for ``extend_schema(responses=...)``: the row is no longer in a state that allows the request.
CONFLICT = OpenApiResponse(ErrorSerializer, description="Conflict: the state changed or does not allow it.")

_DESCRIPTIONS = {
    "400": "Bad request: a malformed body, parameter or field (field errors keyed by field name), or a path, "
    "query string or form field holding a NUL character, or a form with a file part (no endpoint takes files).",
    "403": "Not authenticated, or not allowed.",
    "404": "No such row among those you may see (another tenant's answers the same), or a bad cursor.",
    "413": "Payload too large: the body is over DATA_UPLOAD_MAX_MEMORY_SIZE (the detail names it); nothing was done.",
    "429": "Throttled: wait the seconds in Retry-After.",
}


class ToolhubAutoSchema(AutoSchema):
    """drf-spectacular's schema, each operation's refusals documented with ``ErrorSerializer``."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        responses = operation["responses"]
        for code in self._refusals(operation):
            if code not in responses:
                error = OpenApiResponse(ErrorSerializer, description=_DESCRIPTIONS[code])
                responses[code] = self._get_response_for_code(error, code)
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def get_override_parameters(self) -> list[Any]:
        """``?tenant=`` and ``X-Toolhub-Tenant`` wherever they are read; a view's own account of them comes after."""
        # Here, not at the top: the views import named_tenant while DRF's settings import this module.
        from toolhub.api.named_tenant import named_tenant_parameters, reads_named_tenant

        own: list[Any] = super().get_override_parameters()
        if not reads_named_tenant(self.view):
            return own
        return [*named_tenant_parameters(listing=self._is_list_view()), *own]

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> dict[str, Any]:
        """A request's text field that refuses "" (DRF's default ``allow_blank=False``) documents ``minLength: 1``."""
        schema: dict[str, Any] = super()._map_serializer_field(field, direction, bypass_extensions)
        refuses_blank = isinstance(field, serializers.CharField) and not field.allow_blank
        if direction == "request" and refuses_blank and schema.get("type") == "string" and "minLength" not in schema:
            schema["minLength"] = 1
        return schema

    def _refusals(self, operation: dict[str, Any]) -> list[str]:
        """The error statuses any view answers for this operation: read off its body, parameters and throttle."""
        parameters = operation.get("parameters", [])
        # Every request may be refused as malformed: a body or parameter, and any path, query string or form field
        # holding a NUL (``toolhub.middleware``); every API view needs a login (DRF answers 403: session auth comes
        # first).
        codes = ["400", "403"]
        if any(parameter["in"] == "path" or parameter["name"] == "cursor" for parameter in parameters):
            codes.append("404")
        if "requestBody" in operation:  # a body over Django's limit (toolhub.api.error_pages.body_too_big)
            codes.append("413")
        if getattr(self.view, "throttle_scope", None) and self.method not in SAFE_METHODS:
            codes.append("429")
        return codes
