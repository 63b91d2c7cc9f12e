"""Sagas, their rollbacks, and one compensation per completed compensable step."""

from typing import Any

from django.conf import settings
from django.db import models

from toolhub.models import ToolCall
from toolhub.visible import visible_text


class SagaStatus(models.TextChoices):
    OPEN = "open", "Open (nothing to undo requested)"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    NEEDS_ATTENTION = "needs_attention", "Needs attention"
    RESOLVED = "resolved", "Resolved by an operator"


class Saga(models.Model):
    """The steps of one agent run, or of direct calls sharing a ``saga_id``, that may have to be undone together.

    ``key`` is the run id for a run, or the caller's saga id, unique within its tenant: two tenants may
    name their sagas alike without either learning of the other's. ``last_sequence`` numbers the recorded
    steps in the order they completed, so that they are compensated newest first.
    """

    key = models.CharField(max_length=100)
    run_id = models.UUIDField(null=True, blank=True, db_index=True)
    tenant = models.CharField(max_length=100, blank=True)  # indexed with each list's order: saga_tenant_*
    status = models.CharField(max_length=20, choices=SagaStatus.choices, default=SagaStatus.OPEN, db_index=True)
    last_sequence = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who opened a direct saga over the API (empty for a run's saga, or one opened by its first step).",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The operators' list shows the sagas that moved last first (a compensation failing on an old saga): indexed.
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("operate_saga", "Can retry and resolve a saga's compensations")]
        constraints = [
            models.UniqueConstraint(fields=["key", "tenant"], name="saga_key_per_tenant"),
            # What a compensation's ``(saga, tenant)`` refers to (sagas 0013): it can carry no other tenant.
            models.UniqueConstraint(fields=["id", "tenant"], name="saga_id_tenant"),
        ]
        # A tenant's pages read its own sagas only, in each list's order: the admin's (moved last first) and the
        # API's (newest first).
        indexes = [
            models.Index(fields=["tenant", "updated_at"], name="saga_tenant_updated"),
            models.Index(fields=["tenant", "created_at", "id"], name="saga_tenant_created"),
        ]

    def __str__(self) -> str:
        return f"saga {self.key} ({self.status})"


class RollbackTrigger(models.TextChoices):
    STEP_FAILED = "step_failed", "A step failed"
    ON_DEMAND = "on_demand", "Asked for"


class Rollback(models.Model):
    """One request to undo a saga's completed steps: why, by whom, when it finished, when the model was told."""

    saga = models.ForeignKey(Saga, on_delete=models.CASCADE, related_name="rollbacks")
    trigger = models.CharField(max_length=16, choices=RollbackTrigger.choices)
    failed_call = models.ForeignKey(
        ToolCall, null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="The step that failed."
    )
    requested_by = models.CharField(max_length=200)
    # The person behind ``requested_by`` (the name as it was, kept for the trail): never decides the compensations'
    # approvals (four eyes), whatever they are called later. Kept unset for an automatic rollback.
    asked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who asked for this rollback, when a person did; they never approve its compensations.",
    )
    # The sweep's rollback of a failure found after ``SAGA_UNHEARD_FAILURE_HOURS``: every step it takes on is held for
    # an operator, a step that settles after it was asked for too (``plan_compensation``).
    held_for_operator = models.BooleanField(
        default=False, help_text="Its steps are held for an operator (a failure found too late to undo on its own)."
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    told_at = models.DateTimeField(null=True, blank=True, help_text="When the conversation was told the outcome.")

    class Meta:
        ordering = ["-requested_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["saga", "failed_call"],
                condition=models.Q(failed_call__isnull=False),
                name="saga_rollback_once_per_failure",
            )
        ]
        # The sweep (every 5 s) and ``runs_to_wake`` read the unfinished few; finished rollbacks pile up for ever.
        indexes = [
            models.Index(fields=["saga"], condition=models.Q(finished_at__isnull=True), name="rollback_unfinished")
        ]

    def __str__(self) -> str:
        return f"rollback #{self.pk} of {self.saga.key}"


class CompensationStatus(models.TextChoices):
    RECORDED = "recorded", "Recorded (step completed)"
    PENDING = "pending", "Pending (waits its turn)"
    RUNNING = "running", "Running (its call is in the pipeline)"
    RETRY_SCHEDULED = "retry_scheduled", "Retry scheduled"
    SUCCEEDED = "succeeded", "Compensated"
    FAILED = "failed", "Failed (needs attention)"
    UNKNOWN = "unknown", "Outcome unknown (needs attention)"
    HELD = "held", "Held for an operator (step outcome unknown, or its failure found late)"
    RESOLVED = "resolved", "Resolved by an operator"


#: A compensation in one of these states is being worked on; the next one waits for it.
ACTIVE_COMPENSATION_STATUSES = frozenset({CompensationStatus.RUNNING, CompensationStatus.RETRY_SCHEDULED})
#: A compensation in one of these states needs an operator's decision.
ATTENTION_COMPENSATION_STATUSES = frozenset(
    {CompensationStatus.FAILED, CompensationStatus.UNKNOWN, CompensationStatus.HELD}
)


class Compensation(models.Model):
    """How to undo one completed step of a saga, and how far undoing it got.

    ``call`` is the compensation's own governed call (kind ``compensation``); a retry runs that same
    call again, so the tool sees one idempotency key (the call id) across attempts.
    """

    saga = models.ForeignKey(Saga, on_delete=models.CASCADE, related_name="compensations")
    # Its saga's, kept here so a tenant's list reads its own rows on an index (compensation_tenant_saga): through the
    # saga, acme's page walked every newer globex compensation. Set from the saga when the row is made (``save``); on
    # PostgreSQL the database holds it too (sagas 0013: ``(saga_id, tenant)`` refers to the saga's ``(id, tenant)``).
    tenant = models.CharField(max_length=100, blank=True, editable=False)
    sequence = models.PositiveIntegerField(help_text="Order in which the step completed; undone newest first.")
    rollback = models.ForeignKey(
        Rollback, null=True, blank=True, on_delete=models.SET_NULL, related_name="compensations"
    )
    step_call = models.OneToOneField(ToolCall, on_delete=models.PROTECT, related_name="saga_compensation")
    step_tool = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200, help_text="The compensating tool.")
    arguments = models.JSONField(null=True, blank=True, help_text="The compensation's arguments, once known.")
    mapping_error = models.TextField(blank=True)
    status = models.CharField(
        max_length=20, choices=CompensationStatus.choices, default=CompensationStatus.RECORDED, db_index=True
    )
    call = models.OneToOneField(
        ToolCall, null=True, blank=True, on_delete=models.PROTECT, related_name="compensation_of"
    )
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=1)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    resolved_by = models.CharField(max_length=200, blank=True)
    # Each operator who ran it again or chose to compensate its held step asked for it, as the rollback's asker did:
    # its approval bars them all (``toolhub.sagas.selectors.compensation_askers``).
    retried_by = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="+",
        help_text="Who retried this compensation or chose to compensate its held step; they never approve it.",
    )
    resolution_note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["saga", "-sequence"]
        constraints = [models.UniqueConstraint(fields=["saga", "sequence"], name="saga_compensation_sequence")]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="compensation_due"),
            # The operators' list: a tenant's compensations, newest saga and step first.
            models.Index(fields=["tenant", "saga", "sequence"], name="compensation_tenant_saga"),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        """A new compensation belongs to its saga's tenant, however it is made (the planner, a test, a fixture)."""
        if self._state.adding:
            self.tenant = self.saga.tenant
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return f"#{self.sequence} {visible_text(self.step_tool)} -> {visible_text(self.tool_name)} ({self.status})"


class CompensationAttempt(models.Model):
    """The outcome of one finished attempt of a compensation, with its error, for operators."""

    compensation = models.ForeignKey(Compensation, on_delete=models.CASCADE, related_name="attempt_log")
    call = models.ForeignKey(ToolCall, on_delete=models.PROTECT, related_name="+")
    number = models.PositiveIntegerField(help_text="The call's attempt number (0: refused before it ran).")
    outcome = models.CharField(max_length=20)
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["compensation", "id"]
        constraints = [models.UniqueConstraint(fields=["call", "number"], name="compensation_attempt_once")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.compensation_id}: {self.outcome}"


class SweepMark(models.Model):
    """How far back a periodic sweep has read, kept between ticks (one row a mark, by ``name``).

    The sagas sweep's ``unheard_failures``: failed direct steps that failed before ``reached`` were read by a held scan
    that completed (``recovery._hold_unheard_failures``). No row: the sweep never completed one (a first run, on an
    upgrade too): it reads every failure older than ``SAGA_UNHEARD_FAILURE_HOURS``, a batch a tick.
    """

    name = models.CharField(max_length=50, unique=True)
    reached = models.DateTimeField()
    # A batch cut short by the sweep's limit ends on a row: the next tick starts after it (by ``finished_at, id``), not
    # at its instant again. Empty: the scan got through, rows from ``reached`` on are still to read.
    reached_pk = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} reached {self.reached:%Y-%m-%d %H:%M:%S}"
