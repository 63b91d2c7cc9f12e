"""Approval requests for held-back calls and the operators' decisions on them."""

import uuid

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F
from django.db.models.fields.json import KeyTransform

from toolhub.models import RiskLevel, Tenant, ToolCall, ToolGroup
from toolhub.transitions import TransitionTable
from toolhub.visible import visible_text

#: What to do when a pending request's approver group cannot be deleted (its ``ProtectedError`` and the admin's page).
PENDING_APPROVERS_KEPT = "Pending approval requests wait on this group as their approvers: decide or cancel them first."


def protect_pending(
    collector: models.deletion.Collector, field: models.Field, sub_objs: models.QuerySet, using: str
) -> None:
    """``on_delete`` of a request's approver group: refused while a request waits on it, emptied once decided.

    Emptying the link of a pending request would lift its restriction: every operator of the tenant could then
    decide what only the group might. A decided request keeps its history without the group.
    """
    pending = list(sub_objs.filter(status=ApprovalStatus.PENDING))
    if pending:
        raise models.ProtectedError(PENDING_APPROVERS_KEPT, pending)
    models.SET_NULL(collector, field, sub_objs, using)


class Operator(models.TextChoices):
    EQ = "==", "equals"
    NE = "!=", "differs from"
    GT = ">", "greater than"
    GE = ">=", "at least"
    LT = "<", "less than"
    LE = "<=", "at most"
    IN = "in", "is one of"
    CONTAINS = "contains", "contains"


class ApprovalRule(models.Model):
    """An operator's rule: calls it matches wait for approval (see toolhub.policy for precedence).

    A rule matches when every condition that is set holds: the tool (by name or group), the tenant,
    the minimum risk, and ``argument operator value`` (e.g. ``amount > 1000``).
    """

    name = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    priority = models.IntegerField(default=100, help_text="Lower numbers are evaluated first.")
    tool_name = models.CharField(max_length=200, blank=True)
    tool_group = models.ForeignKey(ToolGroup, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    min_risk = models.CharField(max_length=16, choices=RiskLevel.choices, blank=True)
    argument = models.CharField(max_length=100, blank=True, help_text="Argument name the condition reads.")
    operator = models.CharField(max_length=10, choices=Operator.choices, blank=True)
    value = models.JSONField(null=True, blank=True, help_text="JSON value compared with the argument.")
    required_approvals = models.PositiveSmallIntegerField(default=1)
    # At least 1: the request's terms read 0 as unset (the default timeout), never as "no time to decide".
    timeout_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Seconds operators have to decide; empty: APPROVAL_TIMEOUT_SECONDS.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["priority", "id"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """A rule that can never match holds nothing: refuse it where it is entered (``approvals.rule_checks``).

        A disabled rule holds nothing either way: an operator may switch off a broken one; it is checked when enabled.
        """
        from django.core.exceptions import ValidationError

        from approvals.rule_checks import rule_problems

        problems = rule_problems(self) if self.enabled else {}
        if problems:
            raise ValidationError(problems)


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


#: Every move a request's status may make (``toolhub.transitions``): decided once; an approved call whose
#: tool changed before it ran comes back for a new round.
APPROVAL_TRANSITIONS = TransitionTable(
    "approval status",
    {
        ApprovalStatus.PENDING: {
            ApprovalStatus.APPROVED,
            ApprovalStatus.REJECTED,
            ApprovalStatus.EXPIRED,
            ApprovalStatus.CANCELLED,
        },
        ApprovalStatus.APPROVED: {ApprovalStatus.PENDING},
    },
)


class ApprovalSource(models.TextChoices):
    """What held the call back (``toolhub.policy.ApprovalVerdict.source``): declared, so the desk filters by it."""

    CODE = "code"
    RULE = "rule"
    RISK = "risk"
    TOOL_CHANGED = "tool_changed", "tool changed"
    #: sent back by the worker: governance asked more approvals of the approved call than it was released on, or some
    #: of those approvals lapsed (their givers may no longer decide it: ``approvals.shortfall``; the reason says which)
    RULES_CHANGED = "rules_changed", "rules changed"


class ApprovalRequest(models.Model):
    """One request per held-back call: why it was held, who asked, until when it may be decided."""

    call = models.OneToOneField(ToolCall, on_delete=models.PROTECT, related_name="approval_request")
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING, db_index=True
    )
    reason = models.CharField(max_length=500, help_text="The rule that made this call need approval.")
    tool_name = models.CharField(max_length=200)
    risk = models.CharField(max_length=16, choices=RiskLevel.choices, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A compensation runs in its step's user's name (the requester), but people asked for it: who rolled back, and
    # each operator who retried it or chose to compensate its held step; a run's call, whoever retried the run or
    # an ancestor of it. Four eyes bar every one of them.
    askers = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="+",
        verbose_name="asked by",
        help_text="Who asked for this call in its user's name (who retried its run or an ancestor run; a "
        "compensation's: who rolled the saga back, who retried it or chose to compensate its held step); like the "
        "requester, they never decide it.",
    )
    agent_name = models.CharField(max_length=100, blank=True)
    tenant = models.CharField(max_length=100, blank=True)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    rule = models.ForeignKey(ApprovalRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="requests")
    source = models.CharField(
        max_length=32,
        choices=ApprovalSource.choices,
        blank=True,
        help_text="code, rule, risk, tool_changed or rules_changed.",
    )
    round = models.PositiveSmallIntegerField(
        default=1, help_text="Rises with every edit and when the request is reopened; approvals count within one round."
    )
    original_arguments = models.JSONField(default=dict, blank=True, help_text="The arguments as the model sent them.")
    arguments = models.JSONField(
        default=dict, blank=True, help_text="The version under approval: exactly what runs once it is approved."
    )
    arguments_hash = models.CharField(
        max_length=64, blank=True, help_text="The version's binding: a hash of (tool, tool version, arguments)."
    )
    approver_group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=protect_pending, related_name="+")
    #: What the admin's delete page says to do first when these rows keep a row from being deleted.
    protected_because = {"approver_group": PENDING_APPROVERS_KEPT}
    approver_permission = models.CharField(max_length=150, blank=True)
    further_restrictions = models.JSONField(
        default=list,
        blank=True,
        help_text="The approver restrictions of the call's other governing tool groups, each of which holds too: "
        '[{"group": Django group id or null, "permission": "app_label.codename" or ""}].',
    )
    escalation_group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    escalate_at = models.DateTimeField(null=True, blank=True, db_index=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("decide_approvalrequest", "Can approve or reject held-back tool calls")]
        # A tenant's desk (oldest pending first) and decided pages (newest first), admin and API, read its own rows.
        indexes = [
            models.Index(fields=["tenant", "created_at", "id"], name="approval_tenant_created"),
            # The desk (pending, oldest first) and its counts: the tenant's pending requests, not every request it
            # ever decided (review m: one pending among 3,000 decided read 3,001 rows, three times a page). The status
            # is a key column, not a partial condition, so that PostgreSQL's statistics over (tenant, status)
            # (approvals 0021) cost the desk's two conditions together: with a partial index the planner reckoned
            # a tenant's share of the queue from the tenant column alone and read another tenant's whole queue on
            # the status index (review y).
            models.Index(fields=["tenant", "status", "created_at", "id"], name="approval_tenant_status"),
        ]

    def __str__(self) -> str:
        return f"{visible_text(self.tool_name)} ({self.status})"  # a row's text is for pages


class DecisionKind(models.TextChoices):
    APPROVE = "approve"
    REJECT = "reject"
    EDIT = "edit"


class ApprovalDecision(models.Model):
    """An operator's decision on a request, kept with who, when, why and any edited arguments."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.PROTECT, related_name="decisions")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    decided_by_name = models.CharField(max_length=150)
    decision = models.CharField(max_length=16, choices=DecisionKind.choices)
    comment = models.TextField(blank=True)
    edited_arguments = models.JSONField(null=True, blank=True)
    diff = models.JSONField(null=True, blank=True)
    round = models.PositiveSmallIntegerField(default=1)
    arguments_hash = models.CharField(
        max_length=64, blank=True, help_text="The version of the arguments this decision was taken on."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            # One approval per person and round; a rejection (which ends the request) may follow one's own approval.
            models.UniqueConstraint(
                fields=["request", "round", "decided_by"],
                condition=~models.Q(decision="reject"),
                name="one_approval_per_operator_and_round",
            )
        ]

    def __str__(self) -> str:
        return f"{self.decision} by {self.decided_by_name}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


def new_message_id() -> str:
    """A Standard Webhooks message id: the same for every attempt of one delivery, so receivers drop replays."""
    return f"msg_{uuid.uuid4().hex}"


class WebhookDelivery(models.Model):
    """One notification to the configured webhook; delivered and retried by workers, times in the database.

    A worker claims a due delivery by moving ``next_attempt_at`` past the attempt's lease, posts it outside
    any transaction, then records the outcome; a worker that died in between leaves it due again.
    """

    message_id = models.CharField(max_length=64, unique=True, default=new_message_id, editable=False)
    event = models.CharField(max_length=64)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_index=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        # Due deliveries among the pending few: ``next_attempt_at`` alone read every delivered one since the start.
        indexes = [
            models.Index(
                fields=["next_attempt_at", "id"], condition=models.Q(status="pending"), name="webhook_delivery_due"
            ),
            # A tenant's page of deliveries (newest first; the tenant is the payload's) reads its own rows.
            models.Index(KeyTransform("tenant", "payload"), F("created_at"), F("id"), name="webhook_tenant_created"),
        ]

    def __str__(self) -> str:
        return f"{self.event} ({self.status})"
