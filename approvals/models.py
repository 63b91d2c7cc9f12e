"""Approval requests for held-back calls and the operators' decisions on them."""

from django.conf import settings
from django.db import models

from toolhub.models import ToolCall


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class ApprovalRequest(models.Model):
    """One request per held-back call: why it was held, who asked, until when it may be decided."""

    call = models.OneToOneField(ToolCall, on_delete=models.PROTECT, related_name="approval_request")
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING, db_index=True
    )
    reason = models.CharField(max_length=500, help_text="The rule that made this call need approval.")
    tool_name = models.CharField(max_length=200)
    risk = models.CharField(max_length=16, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent_name = models.CharField(max_length=100, blank=True)
    tenant = models.CharField(max_length=100, blank=True)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("decide_approvalrequest", "Can approve or reject held-back tool calls")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


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
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["request", "decided_by"], name="one_decision_per_operator")]

    def __str__(self) -> str:
        return f"{self.decision} by {self.decided_by_name}"
