"""Core API views: the tool catalogue and its exports, governed calls, external results and artifacts."""

import uuid
from typing import Any

from django.db.models import Prefetch
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from toolhub.api.filters import CallFilter, ToolFilter
from toolhub.api.named_tenant import request_tenant_named
from toolhub.api.pagination import ByNameCursorPagination
from toolhub.api.renderers import VisibleBrowsableAPIRenderer
from toolhub.api.schema import CONFLICT, ToolhubAutoSchema
from toolhub.api.serializers import (
    CallResultInputSerializer,
    CancelInputSerializer,
    ToolCallDetailSerializer,
    ToolCallSerializer,
    ToolDefinitionSerializer,
)
from toolhub.authorization import CATALOGUE_PERMISSION, CallPrincipal
from toolhub.direct import NO_LONGER_A_MEMBER, CallerContextError, not_a_member
from toolhub.disclosure.groups import group_names_read, reader_group_namer
from toolhub.disclosure.unfolding import tool_seen_by_any, usable_tools
from toolhub.downloads import attachment_response
from toolhub.models import (
    CallStatus,
    Tenant,
    TenantMembership,
    ToolCall,
    ToolCallArtifact,
    ToolDefinition,
    is_undoing,
)
from toolhub.rights_recheck import still_visible_after_running_here
from toolhub.selectors import (
    OPERATE_CALL_PERMISSION,
    call_may_operate,
    compensation_settle_refusal,
    tool_calls_operable_by,
    tool_calls_visible_to,
)
from toolhub.tenancy import tenant_scope
from toolhub.tools.export import EXPORT_FORMATS, buildable, tool_definitions
from toolhub.tools.registry import registry
from toolhub.waiting import ResultNotAwaitedError, tool_call_cancel, tool_call_submit_result


class _ExportRenderer(JSONRenderer):
    """JSON, selected by ``?format=<provider>``: the catalogue in that provider's tool shape."""


class OpenAIToolsRenderer(_ExportRenderer):
    format = "openai"


class AnthropicToolsRenderer(_ExportRenderer):
    format = "anthropic"


class MCPToolsRenderer(_ExportRenderer):
    format = "mcp"


class OpenAIStrictToolsRenderer(_ExportRenderer):
    format = "openai-strict"


class GeminiToolsRenderer(_ExportRenderer):
    format = "gemini"


class CompactToolsRenderer(_ExportRenderer):
    format = "compact"


#: A provider export's body: that provider's tool definitions, or MCP's ``tools/list`` result (``{"tools": [...]}``).
TOOL_EXPORT_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "array", "items": {"type": "object", "additionalProperties": {}}},
        {
            "type": "object",
            "properties": {"tools": {"type": "array", "items": {"type": "object", "additionalProperties": {}}}},
            "required": ["tools"],
        },
    ]
}


class _CatalogueSchema(ToolhubAutoSchema):
    """The catalogue's 200: its page, or with the deprecated ``?format=<provider>`` that provider's export."""

    def _get_response_for_code(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        response: dict[str, Any] = super()._get_response_for_code(*args, **kwargs)
        if (args[1] if len(args) > 1 else kwargs.get("status_code")) == "200":
            for content in response.get("content", {}).values():
                content["schema"] = {"oneOf": [content["schema"], TOOL_EXPORT_SCHEMA]}
        return response


class ToolListView(generics.ListAPIView):
    """The tool catalogue with each tool's JSON Schema and the operators' settings.

    Holders of ``toolhub.view_tooldefinition`` (the roles) list the whole catalogue; anyone else only
    the tools they may call (in the ``?tenant=`` named, else in any one of theirs). The JSON list is
    paginated by name (``next`` / ``previous`` cursors, ``?page_size=`` up to 500) and filtered by
    ``ToolFilter``. The provider exports are ``GET /api/v1/tools/export/<provider>/``
    (``ToolExportView``); ``?format=<provider>`` here still answers them, deprecated (a
    ``Deprecation`` header and a ``Link`` to the new address), and goes in the next release.
    """

    serializer_class = ToolDefinitionSerializer
    pagination_class = ByNameCursorPagination
    filterset_class = ToolFilter
    schema = _CatalogueSchema()
    renderer_classes = [
        JSONRenderer,
        VisibleBrowsableAPIRenderer,
        OpenAIToolsRenderer,
        AnthropicToolsRenderer,
        MCPToolsRenderer,
        OpenAIStrictToolsRenderer,
        GeminiToolsRenderer,
        CompactToolsRenderer,
    ]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=["json", *EXPORT_FORMATS],
                description="Deprecated: use /api/v1/tools/export/{provider}/.",
                deprecated=True,
            ),
            OpenApiParameter(
                "tenant", str, description="The tenant to list for (a member's own); without it, any of theirs."
            ),
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        export_format = getattr(request.accepted_renderer, "format", "json")
        if export_format in EXPORT_FORMATS:
            response = Response(tool_definitions(_tools_for(request), export_format))
            response["Deprecation"] = "true"
            response["Link"] = f'</api/v1/tools/export/{export_format}/>; rel="successor-version"'
            return response
        return super().get(request, *args, **kwargs)

    def get_queryset(self):  # type: ignore[no-untyped-def]
        definitions = ToolDefinition.objects.filter(present_in_code=True).order_by("name")
        if self._whole_catalogue():
            return definitions
        return definitions.filter(name__in=list(self._callable_schemas()))

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            named = ToolDefinition.objects.exclude(group="").order_by().values_list("group", flat=True).distinct()
            context["groups"] = group_names_read(list(named), reader_group_namer(self.request.user))
        if not self._whole_catalogue():
            # Each tool's schema as the caller sees it (a by-category facade offers only their categories).
            context["schemas"] = self._callable_schemas()
        return context

    def _whole_catalogue(self) -> bool:
        return getattr(self, "swagger_fake_view", False) or self.request.user.has_perm(CATALOGUE_PERMISSION)

    def _callable_schemas(self) -> dict[str, Any]:
        if not hasattr(self, "_schemas"):
            # A tool whose schema cannot be built is left out (``buildable``), not the whole listing refused.
            self._schemas = dict(buildable(_tools_for(self.request), lambda tool: (tool.name, tool.json_schema)))
        return self._schemas

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        requested = request.query_params.get("format")
        if not force and requested and requested not in {r.format for r in self.get_renderers()}:
            raise ValidationError({"format": f"Unknown format; use one of json, {', '.join(EXPORT_FORMATS)}."})
        return super().perform_content_negotiation(request, force)


class ToolExportView(APIView):
    """The tools you may call, whole and unpaginated, as one provider's tool definitions (a model needs all at once).

    ``openai`` (function tools, ``strict`` where declared), ``openai-strict`` (strict wherever it is
    safe), ``anthropic``, ``gemini`` (function declarations), ``compact`` (OpenAI function tools for
    llama.cpp, vLLM and Ollama grammar compilers) and ``mcp`` (a ``tools/list`` result). Operators'
    switches and grants apply, in the ``?tenant=`` named, else in any one of theirs (``_tools_for``). An unknown
    provider is a 404.
    """

    @extend_schema(
        parameters=[
            OpenApiParameter("provider", str, OpenApiParameter.PATH, enum=list(EXPORT_FORMATS)),
            OpenApiParameter(
                "tenant", str, description="The tenant to export for (a member's own); without it, any of theirs."
            ),
        ],
        responses={200: OpenApiResponse(TOOL_EXPORT_SCHEMA, description="The provider's tool definitions.")},
    )
    def get(self, request: Request, provider: str) -> Response:
        if provider not in EXPORT_FORMATS:
            raise NotFound(f"Unknown provider {provider[:50]!r}; use one of {', '.join(EXPORT_FORMATS)}.")
        return Response(tool_definitions(_tools_for(request), provider))


def _tools_for(request: Request) -> list[Any]:
    """The registered tools the requesting user may call now (operators' switches and grants applied).

    In the tenant ``?tenant=`` names, else in any one of theirs: each tenant is checked on its own, since a
    call is made in one (without a tenant, a member of several is refused), so a tool every one of their
    tenants denies is never listed. A facade with no tool inside they may use is left out, as a run leaves it
    out (``usable_tools``), and a by-category facade offers only the categories holding one (``tool_seen_by_any``).
    """
    user = request.user
    principals = [
        CallPrincipal(user_id=user.pk, username=user.get_username(), tenant=tenant) for tenant in _tenants_for(request)
    ]
    usable = set().union(*(usable_tools(registry.names(), principal) for principal in principals))
    seen = (tool_seen_by_any(tool, principals) for tool in registry.all() if tool.name in usable)
    return [tool for tool in seen if tool is not None]


def _tenants_for(request: Request) -> list[str]:
    """The tenants a listing is for: the one named (``?tenant=`` or the header; one of the user's), else theirs.

    Their memberships, ``""`` for none; ``NamesOneOfTheirTenants`` refused a named tenant not theirs already.
    """
    user = request.user
    requested = request_tenant_named(request)
    if requested is None:
        return list(TenantMembership.objects.filter(user_id=user.pk).values_list("tenant__slug", flat=True)) or [""]
    # The shared boundary: superusers and the cross-tenant permission may ask for any existing tenant.
    if not tenant_scope(user).allows(requested) or not Tenant.objects.filter(slug=requested).exists():
        raise CallerContextError(not_a_member(requested))  # one text for a missing tenant and another's
    return [requested]


def _with_artifacts(calls: Any) -> Any:
    return calls.prefetch_related(Prefetch("artifacts", queryset=ToolCallArtifact.objects.defer("content")))


class CallListView(generics.ListAPIView):
    """Governed calls you may see, newest first; filter by run, tool and status (``CallFilter``)."""

    serializer_class = ToolCallSerializer
    filterset_class = CallFilter

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return _with_artifacts(tool_calls_visible_to(self.request.user))


class CallDetailView(generics.RetrieveAPIView):
    """One call with its progress, artifacts and audit events."""

    serializer_class = ToolCallDetailSerializer

    def get_object(self) -> ToolCall:
        return get_object_or_404(_with_artifacts(tool_calls_visible_to(self.request.user)), pk=self.kwargs["pk"])


class CallResultView(APIView):
    """Supply the result (or the error) of an external tool's call; the run waiting on it resumes.

    Send ``{"result": <any JSON>}`` or ``{"error": "message for the model"}``. Allowed for the user
    the call was made for and for holders of the ``toolhub.change_toolcall`` permission in the
    call's tenant (someone who sees the call without that right gets 403; a saga's compensation is
    for operators only, never for the user whose step it undoes, an operator included); a call of another tenant
    answers 404 like a missing one; a call that does not await a result answers 409 and nothing changes, and one
    whose wait is over (``EXTERNAL_RESULT_TIMEOUT_SECONDS``) expires then and answers 409: a late result is not kept.
    A write like making or cancelling a call: it counts against the same per-user ``calls`` rate.
    """

    throttle_scope = "calls"

    @extend_schema(request=CallResultInputSerializer, responses={200: ToolCallSerializer, 409: CONFLICT})
    def post(self, request: Request, pk: uuid.UUID) -> Response:
        call = get_object_or_404(tool_calls_operable_by(request.user), pk=pk)
        if not call_may_operate(call, request.user):
            raise PermissionDenied("Only the user the call was made for, or an operator, may supply its result.")
        if is_undoing(call.kind, call.context):
            # Made for the user of the step it undoes, it is not theirs: they would mark their own step undone.
            refusal = compensation_settle_refusal(call.user_id, request.user, OPERATE_CALL_PERMISSION)
            if refusal:
                raise PermissionDenied(refusal)
        if (
            call.status != CallStatus.AWAITING_RESULT
        ):  # before reading the body: a late submission is a 409 whatever it holds
            raise ResultNotAwaitedError(_not_awaited(call))
        payload = CallResultInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        # A result that cannot be stored answers 400; a call settled meanwhile 409 (toolhub_exception_handler).
        call = tool_call_submit_result(
            call_id=call.id,
            actor=f"external:{request.user.get_username()}",
            result=data.get("result"),
            error=data.get("error"),
        )
        return _settled_here(request, call)


class CallCancelView(APIView):
    """Cancel a call that has not started: held for approval (its request is withdrawn), queued, or awaiting a result.

    Send ``{"reason": "..."}`` (optional). Allowed for the user the call was made for and for holders of the
    ``toolhub.change_toolcall`` permission in the call's tenant (someone who sees the call without it gets 403); a
    call of another tenant answers 404; a call that started or settled, a saga's compensation, or a subagent's call
    (its child run's end settles it) answers 409 and nothing changes. A run waiting on the call goes on: its model
    reads that the call was not executed, and why.
    """

    throttle_scope = "calls"

    @extend_schema(request=CancelInputSerializer, responses={200: ToolCallSerializer, 409: CONFLICT})
    def post(self, request: Request, pk: uuid.UUID) -> Response:
        call = get_object_or_404(tool_calls_operable_by(request.user), pk=pk)
        if not call_may_operate(call, request.user):
            raise PermissionDenied("Only the user the call was made for, or an operator, may cancel it.")
        body = CancelInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actor = f"user:{request.user.get_username()}"
        reason = f"cancelled by {actor}: {body.validated_data['reason'].strip() or 'no reason given'}"
        call = tool_call_cancel(call=call, actor=actor, reason=reason, reader=request.user)
        return _settled_here(request, call)


def _settled_here(request: Request, call: ToolCall) -> Response:
    """The call the request settled, or a refusal for a caller the work it set off outlived.

    Settled, the call wakes its run (or its saga goes on): eager, the run's next turns (or the next compensations) ran
    in the request, a wait after which the caller's rights are read again, as after a call run in the request.
    """
    if not still_visible_after_running_here(request.user, tool_calls_visible_to, call.pk):
        return Response({"detail": NO_LONGER_A_MEMBER}, status=status.HTTP_403_FORBIDDEN)
    return Response(ToolCallSerializer(_with_artifacts(ToolCall.objects.all()).get(pk=call.pk)).data)


def _not_awaited(call: ToolCall) -> str:
    return f"This call is {call.status}; only a call of an external tool that awaits its result accepts one."


class CallArtifactView(APIView):
    """Download one artifact a call stored (always as an attachment)."""

    @extend_schema(responses={(200, "application/octet-stream"): bytes})
    def get(self, request: Request, pk: uuid.UUID, artifact_id: int) -> HttpResponse:
        visible = ToolCallArtifact.objects.filter(call__in=tool_calls_visible_to(request.user))
        artifact = get_object_or_404(visible, call_id=pk, pk=artifact_id)
        # Never rendered in the browser as the console: a tool's output is not trusted markup.
        return attachment_response(
            bytes(artifact.content), name=artifact.name, media_type=artifact.media_type, default_name="artifact"
        )
