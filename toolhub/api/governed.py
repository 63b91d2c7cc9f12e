"""The governed-call endpoint: ``POST /api/v1/calls/`` for agents built anywhere, with ``?wait=`` long-polling.

A call made here goes through the same pipeline as the agent loop's (kind ``api``): 200 with the
result when it ran, 202 with the call id and approval id while it waits, 4xx with the refusal.
"""

from typing import Any

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from toolhub.api.fields import JSONObjectField, JSONObjectOrTextField
from toolhub.api.named_tenant import request_tenant_named
from toolhub.api.schema import ErrorSerializer
from toolhub.api.serializers import CallOutcomeSerializer, ToolCallDetailSerializer
from toolhub.api.views import CallDetailView, CallListView, _with_artifacts
from toolhub.api.wait_slots import wait_slot
from toolhub.authorization import CallPrincipal
from toolhub.direct import (
    WAITING_STATUSES,
    CallerContextError,
    DirectCallError,
    IdempotencyConflictError,
    NoLongerMemberError,
    answering_principal,
    call_hidden_from,
    call_wait,
    direct_call_request,
)
from toolhub.feedback import unknown_tool_message
from toolhub.models import CallKind, CallStatus, ToolCall
from toolhub.pipeline import visible_tool_names
from toolhub.selectors import tool_calls_visible_to
from toolhub.tenancy import tenant_scope_now
from toolhub.tools.registry import registry

__all__ = ["CallCollectionView", "CallWaitDetailView", "request_tenant_named", "toolhub_error_response"]

#: The HTTP answer to a call in each status (a refused call's ``invalid``/``denied`` are refined below).
_STATUS_CODES: dict[str, int] = {
    CallStatus.SUCCEEDED: status.HTTP_200_OK,
    CallStatus.FAILED: status.HTTP_200_OK,
    CallStatus.NEEDS_ATTENTION: status.HTTP_200_OK,
    CallStatus.COMPENSATED: status.HTTP_200_OK,
    CallStatus.PENDING_APPROVAL: status.HTTP_202_ACCEPTED,
    CallStatus.QUEUED: status.HTTP_202_ACCEPTED,
    CallStatus.RUNNING: status.HTTP_202_ACCEPTED,
    CallStatus.AWAITING_RESULT: status.HTTP_202_ACCEPTED,
    CallStatus.INVALID: status.HTTP_400_BAD_REQUEST,
    CallStatus.DENIED: status.HTTP_403_FORBIDDEN,
    CallStatus.REJECTED: status.HTTP_403_FORBIDDEN,
    CallStatus.EXPIRED: status.HTTP_410_GONE,
    CallStatus.CANCELLED: status.HTTP_410_GONE,
}

#: toolhub's errors a direct call may raise, and their HTTP status (the one place they are mapped).
_ERROR_CODES: list[tuple[type[Exception], int]] = [
    (IdempotencyConflictError, status.HTTP_409_CONFLICT),
    (NoLongerMemberError, status.HTTP_403_FORBIDDEN),
    (CallerContextError, status.HTTP_400_BAD_REQUEST),
    (DirectCallError, status.HTTP_400_BAD_REQUEST),
]


def toolhub_error_response(exc: DirectCallError) -> Response:
    """The answer to a refused direct request (nothing recorded); the project's exception handler may take this over."""
    code = next(code for kind, code in _ERROR_CODES if isinstance(exc, kind))
    body: dict[str, Any] = {"detail": str(exc)}
    if isinstance(exc, IdempotencyConflictError) and exc.call_id:
        body["call"] = str(exc.call_id)
    return Response(body, status=code)


class CallInputSerializer(serializers.Serializer):
    """A governed call: the tool, its arguments, context keys from the allow list, and optional grouping."""

    tool = serializers.CharField(max_length=200, help_text="The tool's name.")
    arguments = JSONObjectOrTextField(
        required=False, default=dict, help_text="A JSON object of the tool's parameters (or that object as a string)."
    )
    context = JSONObjectField(
        required=False,
        default=dict,
        help_text='Keys from TOOLHUB["CLIENT_CONTEXT_KEYS"]; tenant, user and the other reserved keys are refused.',
    )
    idempotency_key = serializers.CharField(
        required=False, allow_blank=True, max_length=255, help_text="Like the Idempotency-Key header."
    )
    saga_id = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Groups direct calls into a saga: a failed step rolls back the completed ones.",
    )
    tenant = serializers.SlugField(required=False, help_text="Your tenant, when you belong to several.")


#: ``?wait=``: a number of seconds, 0 or more (``_wait_seconds`` answers anything else with a 400).
_WAIT_PARAMETER = OpenApiParameter(
    "wait", {"type": "number", "minimum": 0}, description="Seconds to wait for a call that waits (bounded)."
)

#: How ``_answer`` and ``toolhub_error_response`` refuse a call; a refused call's fields come beside ``detail``.
_REFUSED_CALL_RESPONSES = {
    400: OpenApiResponse(
        ErrorSerializer, description="Bad arguments or context (the call, status invalid, and detail)."
    ),
    403: OpenApiResponse(
        ErrorSerializer, description="Denied by policy or rejected by an operator (the call and detail)."
    ),
    404: OpenApiResponse(
        ErrorSerializer, description="A tool you may not see or that does not exist (detail, status)."
    ),
    409: OpenApiResponse(ErrorSerializer, description="The idempotency key came with another request (detail, call)."),
    410: OpenApiResponse(CallOutcomeSerializer, description="The call expired or was cancelled (a replay of it)."),
}


def _wait_seconds(request: Request) -> float:
    raw = request.query_params.get("wait")
    if raw in (None, ""):
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        raise ValidationError({"wait": "Give the seconds to wait, e.g. ?wait=10."}) from None
    if not 0 <= seconds < float("inf"):
        raise ValidationError({"wait": "Give the seconds to wait, e.g. ?wait=10."})
    return seconds


def _follow(request: Request, call: ToolCall, seconds: float) -> ToolCall:
    """The call after following it up to ``seconds``, if one of the user's wait slots is free; else as it is now.

    After a wait the caller's tenants are read again (``tenant_scope_now``): what the request answers then is read
    with the memberships as they are, not as they were when the wait began. A call that no longer waits (one that
    ran in this process, whose request re-read the rights then) is not followed: nothing is waited for, or re-read.
    """
    if seconds and call.status in WAITING_STATUSES:
        with wait_slot(request.user.pk) as free:
            if free:
                call = call_wait(call=call, seconds=seconds)
                tenant_scope_now(request.user)
                return call
    call.refresh_from_db()
    return call


def _answer(call: ToolCall, *, principal: CallPrincipal | None, replayed: bool) -> Response:
    """The call's state as the HTTP answer; a tool the caller may not see is answered as an unknown one."""
    refused = call.status in (CallStatus.INVALID, CallStatus.DENIED)
    if refused and principal is not None and registry.get(call.tool_name) is None:
        return Response({"detail": call.error, "status": CallStatus.INVALID}, status=status.HTTP_404_NOT_FOUND)
    if refused and principal is not None and call_hidden_from(call, principal):
        # Denied for a tool outside the caller's catalogue reads exactly like a missing tool.
        message = unknown_tool_message(call.tool_name, visible_tool_names(principal))
        return Response({"detail": message, "status": CallStatus.INVALID}, status=status.HTTP_404_NOT_FOUND)
    code = _STATUS_CODES.get(call.status, status.HTTP_200_OK)
    body = dict(CallOutcomeSerializer(call, context={"replayed": replayed}).data)
    if code >= 400:
        body["detail"] = call.error or f"The call ended with status {call.status}."
    response = Response(body, status=code)
    if code == status.HTTP_202_ACCEPTED:
        # Reversed, not written out: below the script prefix when served under one (``--root-path``).
        response["Location"] = reverse("call-detail", kwargs={"pk": call.pk})
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response


class CallCollectionView(CallListView):
    """Governed calls: list them (GET), or make one (POST) through the pipeline, as an agent would.

    POST ``{tool, arguments, context, idempotency_key, saga_id, tenant}`` answers 200 with the result
    when the call ran (``status`` succeeded or failed), 202 with the call id (``Location``) and
    ``approval_id`` while it waits for approval or a worker, and otherwise 4xx with the refusal:
    400 for bad arguments or context, 403 when policy denied or an operator rejected it, 404 for a
    tool you may not see or that does not exist, 409 when the idempotency key came with another
    request. ``?wait=N`` follows a waiting call up to N seconds (``CALL_WAIT_MAX_SECONDS`` at most).
    The ``Idempotency-Key`` header (or the body field) makes a retry return the first call.
    Making calls is throttled per user (``calls``: ``TOOLHUB_THROTTLE_CALLS``); listing is not.
    """

    throttle_scope = "calls"

    @extend_schema(
        request=CallInputSerializer,
        responses={
            200: CallOutcomeSerializer,
            202: CallOutcomeSerializer,
            **_REFUSED_CALL_RESPONSES,
        },
        parameters=[
            _WAIT_PARAMETER,
            OpenApiParameter("Idempotency-Key", str, location=OpenApiParameter.HEADER),
        ],
    )
    def post(self, request: Request) -> Response:
        payload = CallInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        wait = _wait_seconds(request)
        header_key = request.headers.get("Idempotency-Key", "")
        body_key = data.get("idempotency_key", "")
        if header_key and body_key and header_key != body_key:
            raise ValidationError({"idempotency_key": "The Idempotency-Key header and the body field differ."})
        arguments = request.data.get("arguments", {}) if isinstance(request.data, dict) else data["arguments"]
        try:
            made = direct_call_request(
                user=request.user,
                tool_name=data["tool"],
                arguments=arguments,
                context=data["context"],
                tenant=request_tenant_named(request, data.get("tenant")),
                saga_id=data.get("saga_id", ""),
                idempotency_key=header_key or body_key,
                kind=CallKind.API,
                client={"channel": "api", "user_agent": request.headers.get("User-Agent", "")[:200]},
            )
        except DirectCallError as exc:
            return toolhub_error_response(exc)
        call = _follow(request, made.call, wait)
        try:
            principal = answering_principal(request.user, call)
        except DirectCallError as exc:  # the caller left the call's tenant while it was followed
            return toolhub_error_response(exc)
        return _answer(call, principal=principal, replayed=made.replayed)


class CallWaitDetailView(CallDetailView):
    """One call with its progress, artifacts and audit events; ``?wait=N`` waits up to N s while it waits."""

    @extend_schema(parameters=[_WAIT_PARAMETER])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        wait = _wait_seconds(request)
        if wait:
            _follow(request, get_object_or_404(tool_calls_visible_to(request.user), pk=self.kwargs["pk"]), wait)
        call = get_object_or_404(_with_artifacts(tool_calls_visible_to(request.user)), pk=self.kwargs["pk"])
        return Response(ToolCallDetailSerializer(call, context=self.get_serializer_context()).data)
