"""LangGraph / LangChain v1 agents on toolhub's governed calls and durable approvals.

``create_agent(model, tools=hub.tools(), middleware=[hub.middleware()], checkpointer=...)`` gives an
agent whose tools are the toolhub tools its user may call, each executed through the governed call
(``toolhub.direct``: validation, authorization, approval, execution, audit), and whose
``HumanInTheLoopMiddleware`` (per-call interrupts) pauses exactly the calls toolhub policy holds for
approval. :meth:`LangGraphToolhub.request_approvals` turns the paused run's interrupts into toolhub
approval requests (one governed call each, still pending); operators decide them in the admin or
through ``POST /api/v1/approvals/{id}/approve/`` (with edited arguments) or ``.../reject/``;
:meth:`LangGraphToolhub.resume_command` then builds the ``Command(resume=...)`` that carries their
decisions (approve, edit with the approved arguments, reject with the operator's comment).

One LangGraph tool call is one toolhub call: its id is derived from the thread id and the model's
tool call id, so when the resumed graph runs the tool, the tool finds the call the operator already
released (and ran) and answers with its result instead of running it a second time. The approver's
identity is in that call's audit trail, which none of the LangGraph approval paths records.
"""

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.types import Command, Interrupt

from toolhub.adapters._common import NOT_RUN_STATUSES, edited_arguments, offered_tools, own_call, pause_decision
from toolhub.arguments import ArgumentsRefused, parse_arguments, storable_arguments, validate_arguments
from toolhub.audit import redact
from toolhub.authorization import CallPrincipal, tool_definitions
from toolhub.direct import WAITING_STATUSES, call_approval_id, call_wait, caller_principal, direct_call_request
from toolhub.exceptions import ToolhubError
from toolhub.models import AuditEvent, CallKind, CallStatus, ToolCall
from toolhub.pipeline import approval_hash, approval_hash_matches, visible_tool_names
from toolhub.policy import approval_verdict
from toolhub.selectors import withheld_names
from toolhub.tools.context import ToolContext
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

__all__ = [
    "LangGraphToolhub",
    "LangGraphBridgeError",
    "PendingReview",
    "langgraph_call_id",
]

#: The namespace of the call ids derived from (thread id, tool call id).
_CALL_NAMESPACE = uuid.UUID("9b0b6c57-3f5e-4d8e-9a57-6c1f0d6a2b41")
#: The key of the request's client data (``call.requested``) that binds the model's own arguments.
_ASKED_KEY = "asked_arguments_hash"
#: The decisions toolhub can carry back: an operator approves, edits (then approves) or rejects.
#: The metadata key of the LangChain tools a hub made: which hub (its id) handed the tool out.
_HANDED_BY = "toolhub_hub"
_DECISIONS: list[Any] = ["approve", "edit", "reject"]


T = TypeVar("T")


@contextmanager
def _own_connection() -> Iterator[None]:
    """Close a database connection that this block opened outside a transaction.

    LangGraph runs sync tools and tool middleware on its own pool threads; a connection such a thread
    opened would otherwise stay open until the thread object is collected.
    """
    opened_here = connection.connection is None
    try:
        yield
    finally:
        if opened_here and not connection.in_atomic_block:
            connection.close()


def _closing(fn: Callable[..., T]) -> Callable[..., T]:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        with _own_connection():
            return fn(*args, **kwargs)

    return wrapper


class LangGraphBridgeError(ToolhubError):
    """A LangGraph interrupt or tool call cannot be matched to a toolhub call of this caller."""


def langgraph_call_id(thread_id: str, tool_call_id: str) -> uuid.UUID:
    """The toolhub call id of one tool call of one thread: the same on the pause and on the resumed run."""
    if not thread_id or not tool_call_id:
        raise LangGraphBridgeError(
            "A governed LangGraph tool call needs a thread id (config['configurable']['thread_id']) and the "
            "model's tool call id; run the agent with a checkpointer and a thread id."
        )
    # A lone surrogate (a model's tool call id may hold one) is read as "?": uuid5 cannot encode it, and LangGraph's
    # checkpoint serializer keeps it as "?", so the resumed run's tool call id derives to the same call.
    name = f"{thread_id}\x00{tool_call_id}".encode("utf-8", "replace")
    return uuid.uuid5(_CALL_NAMESPACE, name.decode("utf-8"))


@dataclass(frozen=True)
class PendingReview:
    """One paused tool call and the toolhub call (and approval request) that stands for it."""

    interrupt_id: str
    tool_call_id: str
    call_id: uuid.UUID
    approval_id: int | None
    status: str


@dataclass(frozen=True)
class LangGraphToolhub:
    """The toolhub side of one caller's LangGraph agent: its tools, its approval gate and its resumes.

    ``user`` is the authenticated person the agent acts for (tenant and user come from here, never
    from the model); ``tenant`` names one of theirs when they belong to several.
    """

    user: AbstractBaseUser
    tenant: str | None = None
    #: How long a tool waits for its call to settle (cut to ``CALL_WAIT_MAX_SECONDS``).
    wait_seconds: float = 30.0
    #: The tools :meth:`tools` handed out: the agent's. Only their calls are paused and filed for approval.
    _handed: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    def principal(self) -> CallPrincipal:
        return caller_principal(self.user, tenant=self.tenant)

    # -- tools -----------------------------------------------------------------------------------------

    def tools(self, names: Iterable[str] | None = None) -> list[BaseTool]:
        """LangChain tools for the toolhub tools this caller may use (``offered_tools``; ``names`` narrows them)."""
        offered = offered_tools(self.principal())
        if names is not None:
            wanted = set(names)
            available = [tool.name for tool in offered]
            unknown = sorted(wanted - set(available))
            if unknown:
                raise LangGraphBridgeError(
                    f"Tools {', '.join(name[:100] for name in unknown[:10])} are unknown or not allowed for this "
                    f"user; allowed: {', '.join(available[:20]) or 'none'}."
                )
            offered = [tool for tool in offered if tool.name in wanted]
        self._handed.update(tool.name for tool in offered)
        return [self._tool(tool) for tool in offered]

    def _tool(self, tool: Tool) -> BaseTool:
        name = tool.name

        def run(runtime: ToolRuntime, **arguments: Any) -> str:
            return self._call(name, arguments, runtime)

        return StructuredTool.from_function(
            func=run,
            name=name,
            description=tool.description or name,
            args_schema=tool.json_schema,
            infer_schema=False,
            metadata={_HANDED_BY: id(self)},
        )

    @_closing
    def _call(self, name: str, arguments: Mapping[str, Any], runtime: ToolRuntime) -> str:
        """Run (or join) the governed call of this tool call and answer with what the model may see.

        A request refused before it reached the pipeline (no thread id, a taken call id, an unusable
        tenant) answers with toolhub's bounded message; nothing was recorded or run.
        """
        try:
            call_id = langgraph_call_id(_thread_id(runtime.config), runtime.tool_call_id or "")
            call = self._own_call(call_id, name)
            joined = call is not None
            if call is None:
                call = self._request(name, arguments, call_id, runtime.config).call
        except ToolhubError as refused:
            return f"Error: {refused}"
        if joined and call.status not in NOT_RUN_STATUSES and not _same_arguments(call, arguments):
            # The graph runs other arguments than the ones toolhub ran or released: never run them silently.
            return (
                f"Error: these arguments are not the ones approved for call {call.id}; the call was not run "
                "again. Ask for a new call."
            )
        return _answer(call_wait(call=call, seconds=self.wait_seconds))

    def _request(self, name: str, arguments: Mapping[str, Any], call_id: uuid.UUID, config: Mapping[str, Any]) -> Any:
        client: dict[str, Any] = {"channel": "langgraph", "thread_id": str(_thread_id(config))[:200]}
        asked = _asked_hash(name, arguments)
        if asked is not None:
            client[_ASKED_KEY] = asked
        return direct_call_request(
            user=self.user,
            tool_name=name,
            arguments=dict(arguments),
            tenant=self.tenant,
            kind=CallKind.API,
            client=client,
            call_id=call_id,
        )

    def _own_call(self, call_id: uuid.UUID, name: str) -> ToolCall | None:
        """The call of this id if it is this caller's, for this tool; another's is refused, never shown."""
        try:
            return own_call(call_id, self.principal(), name)
        except LookupError:
            raise LangGraphBridgeError(
                "This thread's tool call id is taken by another call; use a new thread id."
            ) from None

    # -- the approval gate ------------------------------------------------------------------------------

    def middleware(self, names: Iterable[str] | None = None) -> HumanInTheLoopMiddleware:
        """``HumanInTheLoopMiddleware`` (per-call) that pauses the tool calls toolhub policy holds for approval.

        Every visible tool is gated by a ``when`` predicate asking toolhub's policy (code rule, operators'
        rules, risk) about the call's own arguments; on resume it answers the same, since the call exists.
        A tool :meth:`tools` did not hand out is never paused: the agent does not have it, and its ToolNode
        refuses the name (pausing it would file a governed call of a tool the agent was never given). That holds
        per agent: the call is paused only when the agent's own ToolNode resolved the name to a tool this hub
        made, so a hub handing ``risky_effect`` to one agent pauses nothing of it for another.
        """
        gated = list(names) if names is not None else visible_tool_names(self.principal())
        interrupt_on: dict[str, bool | InterruptOnConfig] = {
            name: InterruptOnConfig(allowed_decisions=_DECISIONS, when=self._needs_review) for name in gated
        }
        return HumanInTheLoopMiddleware(
            interrupt_on=interrupt_on,
            interrupt_mode="per_call",
            description_prefix="toolhub holds this call for an operator's approval",
        )

    @_closing
    def _needs_review(self, request: ToolCallRequest) -> bool:
        tool_call = request.tool_call
        name = tool_call["name"]
        resolved = request.tool  # what this agent's ToolNode found under the name: None when it has no such tool
        metadata = getattr(resolved, "metadata", None) or {}
        if name not in self._handed or metadata.get(_HANDED_BY) != id(self):
            return False  # not the agent's tool: its ToolNode refuses the name
        call_id = langgraph_call_id(_thread_id(request.runtime.config), tool_call.get("id") or "")
        existing = self._own_call(call_id, name)
        if existing is not None:
            return call_approval_id(existing) is not None
        tool = registry.get(name)
        if tool is None:
            return False  # the governed call refuses it with the catalogue's message
        try:
            validated = validate_arguments(tool, parse_arguments(tool_call.get("args") or {}, tool))
        except ArgumentsRefused:
            return False  # refused as invalid by the governed call; nothing to approve
        principal = self.principal()
        context = ToolContext.layered(
            {}, boundary={"tenant": principal.tenant, "user": principal.username, "user_id": principal.user_id}
        )
        verdict = approval_verdict(
            tool=tool,
            definition=tool_definitions().get(name),
            arguments=validated,
            ctx=context,
            principal=principal,
        )
        return verdict is not None

    def request_approvals(self, interrupts: Sequence[Interrupt], config: Mapping[str, Any]) -> list[PendingReview]:
        """Make each paused tool call a governed call held for approval (once: a repeat finds the same call).

        Only a tool :meth:`tools` handed to the agent is filed: an interrupt naming another (a tool the agent
        was never given, or a hand-made interrupt) raises :class:`LangGraphBridgeError` and nothing is filed.
        """
        asked = []
        for item in interrupts:
            value = item.value
            if not isinstance(value, Mapping) or value.get("type") != "tool_approval":
                raise LangGraphBridgeError(
                    "Only the per-call interrupts of LangGraphToolhub.middleware() can become approval requests."
                )
            name, tool_call_id = str(value["name"]), str(value["tool_call_id"])
            call_id = langgraph_call_id(_thread_id(config), tool_call_id)
            call = self._own_call(call_id, name)
            if call is None and name not in self._handed:
                raise LangGraphBridgeError(
                    f"Tool {name[:100]} is not one this hub gave the agent (LangGraphToolhub.tools); nothing was "
                    f"filed. The agent's tools: {', '.join(sorted(self._handed)[:20]) or 'none'}."
                )
            asked.append((item, name, tool_call_id, call_id, call))
        reviews = []
        for item, name, tool_call_id, call_id, call in asked:
            value = item.value
            call = call or self._request(name, value.get("args") or {}, call_id, config).call
            reviews.append(
                PendingReview(
                    interrupt_id=item.id,
                    tool_call_id=tool_call_id,
                    call_id=call.id,
                    approval_id=call_approval_id(call),
                    status=str(call.status),
                )
            )
        return reviews

    def resume_command(
        self, interrupts: Sequence[Interrupt], config: Mapping[str, Any], *, wait: float = 0.0
    ) -> Command[Any] | None:
        """The ``Command(resume=...)`` carrying the operators' decisions, or ``None`` while one is still pending.

        ``wait`` (seconds, cut to ``CALL_WAIT_MAX_SECONDS``) follows the calls meanwhile: until each is
        decided and, once released, has run, so the resumed tools answer with results, not "queued".
        """
        deadline = time.monotonic() + max(float(wait), 0.0)
        answers: dict[str, dict[str, Any]] = {}
        for review in self.request_approvals(interrupts, config):
            call = ToolCall.objects.get(pk=review.call_id)
            left = deadline - time.monotonic()
            if left > 0 and call.status in WAITING_STATUSES:
                call = call_wait(call=call, seconds=left)
            if call.status == CallStatus.PENDING_APPROVAL:
                return None
            answers[review.interrupt_id] = _decision(call)
        return Command(resume=answers)


def _model_arguments(tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """``arguments`` as toolhub stores them before any interceptor (``None`` when they are refused)."""
    try:
        return storable_arguments(tool, validate_arguments(tool, parse_arguments(dict(arguments), tool)))
    except ArgumentsRefused:
        return None


def _asked_hash(name: str, arguments: Mapping[str, Any]) -> str | None:
    """The binding of the model's own arguments (before interceptors), kept in the request's client data.

    Keyed like an approval's binding (``approval_hash``): the audit trail shows it, and a sensitive value
    cannot be guessed from it.
    """
    tool = registry.get(name)
    if tool is None:
        return None
    model_arguments = _model_arguments(tool, arguments)
    return None if model_arguments is None else approval_hash(tool.name, tool.version, model_arguments)


def _same_arguments(call: ToolCall, arguments: Mapping[str, Any]) -> bool:
    """Whether the graph runs the tool call toolhub has: the model's own arguments, or the released ones.

    The released ones are compared as the caller sees them (the HITL ``edit`` hands them over redacted), so a
    sensitive value is not compared: toolhub runs the version it released whatever the graph holds. The model's
    are compared with their binding kept at the request, before any interceptor: a call an interceptor rewrote
    (a normalizer, a tagger) ran with what the model asked for, and says so.
    """
    withheld = withheld_names(call.tool_name, call.arguments, arguments, version=call.tool_version)
    if redact(dict(arguments), withheld) == redact(call.arguments, withheld):
        return True
    tool = registry.get(call.tool_name)
    model_arguments = None if tool is None else _model_arguments(tool, arguments)
    if model_arguments is None:
        return False
    requested = (
        AuditEvent.objects.filter(call_id=call.pk, event_type="call.requested").values_list("data", flat=True).first()
    )
    client = json.loads(requested).get("client") if requested else None
    asked = client.get(_ASKED_KEY) if isinstance(client, Mapping) else None
    return isinstance(asked, str) and approval_hash_matches(asked, call.tool_name, call.tool_version, model_arguments)


def _decision(call: ToolCall) -> dict[str, Any]:
    """The HITL decision of a decided call: reject with the reason, edit to the operator's arguments, or approve.

    A call that never ran (withdrawn by its requester too: ``pause_decision``) is rejected, never approved. Only
    an operator's edit is an ``edit``, carrying the arguments as the caller may see them (``edited_arguments``):
    the graph tells its model what they were, and an interceptor's rewrite (a sensitive value it put in) is not
    the model's to read.
    """
    decided = pause_decision(call)
    if decided is None or not decided.approve:
        return {"type": "reject", "message": decided.message if decided else f"Call {call.id} still waits."}
    edited = edited_arguments(call)
    if edited is None:
        return {"type": "approve"}
    return {"type": "edit", "edited_action": {"name": call.tool_name, "args": edited}}


def _answer(call: ToolCall) -> str:
    """What the model reads: the result as JSON, or the call's (already sanitized) error, or that it waits."""
    if call.status == CallStatus.SUCCEEDED:
        return json.dumps(call.result, default=str)
    if call.status == CallStatus.PENDING_APPROVAL:
        return f"Call {call.id} is waiting for an operator's approval; it runs once approved."
    if call.status in {CallStatus.QUEUED, CallStatus.RUNNING, CallStatus.AWAITING_RESULT}:
        return f"Call {call.id} is still {call.status}; its result is not in yet."
    return f"Error: {call.error or call.status}"


def _thread_id(config: Mapping[str, Any] | None) -> str:
    configurable = (config or {}).get("configurable") or {}
    return str(configurable.get("thread_id") or "")
