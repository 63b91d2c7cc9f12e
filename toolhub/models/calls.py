"""The tool catalogue and governed tool calls: their rows, statuses, idempotency keys and artifacts."""

import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models.fields.json import KeyTransform

from toolhub.visible import visible_text

if TYPE_CHECKING:
    from toolhub.governance import GovernanceHold


class RiskLevel(models.TextChoices):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class ToolDefinition(models.Model):
    """The catalogue row mirroring a registered tool; holds what operators govern at run time.

    Code is the source of truth for name, description and schema (refreshed by ``sync_tools``);
    ``enabled`` and ``risk_override`` belong to operators and are never overwritten by a sync.
    """

    name = models.CharField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    module = models.CharField(max_length=200, blank=True)
    version = models.CharField(max_length=32, blank=True)
    input_schema = models.JSONField(default=dict)
    risk = models.CharField(max_length=16, choices=RiskLevel.choices, default=RiskLevel.LOW)
    risk_override = models.CharField(max_length=16, choices=RiskLevel.choices, blank=True)
    group = models.CharField(max_length=100, blank=True)
    enabled = models.BooleanField(default=True)
    present_in_code = models.BooleanField(default=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def effective_risk(self) -> str:
        return self.risk_override or self.risk


class CallStatus(models.TextChoices):
    INVALID = "invalid"
    DENIED = "denied"
    PENDING_APPROVAL = "pending_approval"
    REJECTED = "rejected"
    EXPIRED = "expired"
    QUEUED = "queued"
    RUNNING = "running"
    #: An external (schema-only) tool's call waits for its result from outside.
    AWAITING_RESULT = "awaiting_result"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    NEEDS_ATTENTION = "needs_attention"
    COMPENSATED = "compensated"


#: Statuses after which nothing more happens to a call on its own; a waiting run can go on.
SETTLED_STATUSES = frozenset(
    {
        CallStatus.INVALID,
        CallStatus.DENIED,
        CallStatus.REJECTED,
        CallStatus.EXPIRED,
        CallStatus.SUCCEEDED,
        CallStatus.FAILED,
        CallStatus.CANCELLED,
        CallStatus.NEEDS_ATTENTION,
        CallStatus.COMPENSATED,
    }
)


class CallKind(models.TextChoices):
    """Who asked for a call: the agent loop (or a service in-process), the REST API, an MCP client, or the sagas."""

    CALL = "call"
    COMPENSATION = "compensation"
    API = "api", "REST API (POST /api/v1/calls/)"
    MCP = "mcp", "MCP client"
    #: A call an agentic tool's inner model made (``toolhub.agentic``); ``context.parent_call_id`` names the outer.
    INNER = "inner"


#: Kinds of calls that are steps (of a run or of a direct saga), as opposed to the sagas' compensations.
#: An agentic tool's inner call is a step of its outer call's saga: what it did is undone with the rest.
STEP_KINDS = frozenset({CallKind.CALL, CallKind.API, CallKind.MCP, CallKind.INNER})
#: Steps whose failure rolls their saga back. An inner call's failure is its inner model's to handle (it is told
#: and may go on); the outer call's failure, if it comes to that, rolls the saga back.
ROLLBACK_KINDS = STEP_KINDS - {CallKind.INNER}
#: Saga steps among calls: of a step kind, and not made on behalf of a compensation. A compensation's context names
#: the step it ``compensates`` and an agentic compensation's inner calls inherit it: what a compensation did is never
#: a step of the saga it undoes (no compensation of a compensation).
SAGA_STEPS = models.Q(kind__in=STEP_KINDS, context__compensates__isnull=True)


def is_undoing(kind: str, context: dict | None) -> bool:
    """Whether a call is made on behalf of a compensation: its own, or an agentic compensation's inner calls.

    Treated as the compensation is wherever one is set apart: never a saga step, never cancelled or withdrawn with
    its run, its askers barred from deciding it, never settled by hand by the user whose step it undoes.
    """
    return kind == CallKind.COMPENSATION or "compensates" in (context or {})


def undoing(prefix: str = "") -> models.Q:
    """``is_undoing`` as a filter, on ``ToolCall`` or through a relation to it (``prefix`` such as ``"call__"``)."""
    return models.Q(**{f"{prefix}kind": CallKind.COMPENSATION}) | models.Q(
        **{f"{prefix}context__compensates__isnull": False}
    )


def is_saga_step(kind: str, context: dict | None) -> bool:
    """Whether a call of ``kind`` with ``context`` is a saga step (``SAGA_STEPS``, read from a loaded row)."""
    return kind in STEP_KINDS and not is_undoing(kind, context)


#: How a saga step the sagas sweep reads again may have ended (``toolcall_ended_saga_step``): succeeded (it is
#: compensated when its saga was rolled back after it was asked for), its outcome unknown, or, a direct step, without
#: succeeding after it was on its way (it may have carried a failure on). Failed steps have an index of their own;
#: refusals (``invalid``, ``denied``) are inserted settled, never on their way.
ENDED_STEP_STATUSES = (
    CallStatus.CANCELLED,
    CallStatus.EXPIRED,
    CallStatus.NEEDS_ATTENTION,
    CallStatus.REJECTED,
    CallStatus.SUCCEEDED,
)


class ToolCall(models.Model):
    """One governed call of a tool, whoever asked for it; its status history is in the audit trail."""

    #: Set by a write guarded by the governance stamp (``toolhub.calls``), not stored: the stamp read after the
    #: write's locks (PostgreSQL), and whether a governance change committed while it waited for them.
    stamp_after_write: int | None = None
    governance_moved: bool = False
    #: Set by a worker's claim that checked the governance stamp (``toolhub.claims``), not stored: the governance it
    #: checked (``GovernanceHold``), which the re-check before the tool runs decides under (not whatever the process
    #: caches by then, and without putting its stamp back as the process's).
    claim_hold: "GovernanceHold | None" = None

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=CallKind.choices, default=CallKind.CALL)
    tool_name = models.CharField(max_length=200)
    tool_version = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=20, choices=CallStatus.choices)
    arguments = models.JSONField(default=dict, blank=True)
    raw_arguments = models.TextField(blank=True)
    context = models.JSONField(default=dict, blank=True)
    tenant = models.CharField(max_length=100, blank=True)
    # No index of its own: ``toolcall_user_tenant_created`` leads with it (every insert pays one index fewer).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tool_calls",
        db_index=False,
    )
    agent_name = models.CharField(max_length=100, blank=True)
    run_id = models.UUIDField(null=True, blank=True)
    turn = models.PositiveIntegerField(default=0)
    position = models.PositiveIntegerField(default=0)
    model_call_id = models.CharField(max_length=100, blank=True)
    saga_id = models.CharField(max_length=100, blank=True)
    approval_hash = models.CharField(max_length=64, blank=True)
    approved_under = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text=(
            "The stamp it was decided under: when the policy queued it as needing no approval, or when its "
            "approvals released it; the governance stamp, bound to the group its tool's code declared then "
            "(toolhub.policy.decision_stamp). A worker claiming it under the same stamp reads nothing; otherwise, or "
            "none (not known, or cleared when a compensation's retry queued it again), the worker judges it again: "
            "the policy of now for a call never held, its approvals, request and askers in full for an approved one."
        ),
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="What the model is told when the call did not succeed.")
    error_detail = models.TextField(blank=True, help_text="Full detail (traceback) for auditors only.")
    attempts = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    progress = models.JSONField(
        default=list, blank=True, help_text="Progress updates of a long tool, oldest first; never shown to the model."
    )
    suspension = models.JSONField(
        null=True,
        blank=True,
        help_text="Why a tool suspended itself and the payload it handed out; its result comes from outside.",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        # Every index slows the hot path's INSERT and UPDATEs: the composites serve run_id, status and
        # tool_name lookups by their first column, and no column is searched by prefix (no _like twins).
        indexes = [
            models.Index(fields=["run_id", "turn", "position"], name="toolcall_run_turn"),
            # The open calls of an agent's turn, few whatever the history: ``runs_to_wake`` asks which idle runs
            # still have one, and with many idle runs PostgreSQL answers with a hash anti join over all the open
            # calls, which this reads (not every call ever). Its condition is the selector's, so the planner
            # proves the query's rows within it.
            models.Index(
                fields=["run_id", "turn"],
                condition=models.Q(kind="call") & ~models.Q(status__in=sorted(SETTLED_STATUSES)),
                name="toolcall_open_of_turn",
            ),
            # Status + newest first serves the console's status filter; the sweeper's few queued rows too.
            models.Index(fields=["status", "created_at"], name="toolcall_status_created"),
            models.Index(fields=["tool_name", "created_at"], name="toolcall_tool_created"),
            # A tenant's calls in the console's order (``-created_at, -id``) to the last column: a page is a walk of it.
            # With ``id`` left to a sort, statistics older than a tenant's calls (one new, or grown since the last
            # ANALYZE) had the planner sort every call of the tenant for each page (review u).
            models.Index(fields=["tenant", "created_at", "id"], name="toolcall_tenant_created"),
            # A member's own calls in their tenants (``visible_rows``): by time, their page walked their calls of a
            # tenant they left and the others' calls of theirs. The planner takes this index only knowing that a user's
            # calls keep to few tenants: statistics on (user, tenant), made in toolhub 0048 (PostgreSQL).
            models.Index(fields=["user", "tenant", "created_at"], name="toolcall_user_tenant_created"),
            models.Index(fields=["saga_id"], name="toolcall_saga"),
            # The sagas sweep's unheard failures: failed direct steps only, whatever the calls' history, by when they
            # failed (a step may wait days for its approval or an external result before it fails).
            models.Index(
                fields=["finished_at"],
                condition=models.Q(status="failed", run_id__isnull=True) & ~models.Q(saga_id=""),
                name="toolcall_failed_direct_step",
            ),
            # The sagas sweep's saga steps that settled unheard (``toolhub.sagas.unheard.repair_ended_steps``), a run's
            # and direct ones alike: by when they ended, from its mark on; failed ones and refusals are not in it.
            models.Index(
                fields=["finished_at"],
                condition=models.Q(status__in=list(ENDED_STEP_STATUSES))
                & (models.Q(run_id__isnull=False) | ~models.Q(saga_id="")),
                name="toolcall_ended_saga_step",
            ),
            # The calls made undoing a saga step (an agentic compensation's inner calls name it: ``compensates``),
            # few whatever the calls' history: a saga's trail finds them by their steps (``saga_audit_events``),
            # which otherwise read every call of the tenant since the saga began. Its condition is implied by the
            # trail's equality on the key, so the planner proves the query's rows within it.
            models.Index(
                KeyTransform("compensates", "context"),
                models.F("tenant"),
                condition=models.Q(context__compensates__isnull=False),
                name="toolcall_compensates",
            ),
            # The provider's id of the tool call: auditors find a call by it (the correlation id).
            models.Index(fields=["model_call_id"], name="toolcall_model_call"),
        ]

    def __str__(self) -> str:
        return f"{visible_text(self.tool_name)} [{self.status}] {self.id}"  # a row's text is for pages

    @property
    def is_settled(self) -> bool:
        return self.status in SETTLED_STATUSES

    def model_text(self) -> str:
        """The tool result the model reads for this call, whatever its fate."""
        from toolhub.tools.results import result_text_for_model

        if self.status == CallStatus.SUCCEEDED:
            return result_text_for_model(self.result)
        if self.error:
            return self.error
        return f"The call of {self.tool_name} ended with status {self.status}."


class CallIdempotencyKey(models.Model):
    """An ``Idempotency-Key`` a client sent with a direct call, bound to the request it first came with.

    The unique constraint (tenant, user, key) makes a concurrent double submit create one call: the
    second INSERT waits for the first transaction and fails, and the second request answers with the
    first's call. ``fingerprint`` is the SHA-256 of the canonical request; another request under the
    same key is refused (409), as Stripe does.
    """

    tenant = models.CharField(max_length=100, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    call = models.OneToOneField(
        ToolCall, null=True, blank=True, on_delete=models.CASCADE, related_name="idempotency_key"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user", "key"], name="unique_call_idempotency_key")]

    def __str__(self) -> str:
        return f"{self.key} -> {self.call_id}"


class ToolCallArtifact(models.Model):
    """A file or data set a tool returned with ``ToolResult.artifact``, stored with its call.

    Only a summary reaches the model; the content is downloaded by people with access to the call.
    """

    call = models.ForeignKey(ToolCall, on_delete=models.PROTECT, related_name="artifacts")
    name = models.CharField(max_length=200)
    media_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64, help_text="Also recorded in the call's audit event.")
    content = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.media_type}, {self.size} bytes)"
