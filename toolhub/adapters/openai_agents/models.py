"""A paused OpenAI Agents SDK run: its serialized ``RunState`` and the toolhub calls it waits for."""

import uuid

from django.conf import settings
from django.db import models


class PausedRunStatus(models.TextChoices):
    PAUSED = "paused"
    RESUMED = "resumed"


class PausedAgentRun(models.Model):
    """One interruption of an SDK run, kept server-side until the operators have decided its calls.

    The state never leaves toolhub (the SDK warns that a ``RunState`` snapshot must come from trusted
    storage); a run that pauses again after resuming gets a new row with the same ``run_key``.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run_key = models.CharField(max_length=64, db_index=True)
    tenant = models.CharField(max_length=100, blank=True)  # indexed with the list's order: pausedrun_tenant_created
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    agent_name = models.CharField(max_length=200)
    #: ``RunState.to_json()`` of the interrupted run.
    state = models.JSONField()
    #: The toolhub calls (ids as text) of the run's interruptions, in the SDK's order.
    call_ids = models.JSONField(default=list)
    status = models.CharField(max_length=20, choices=PausedRunStatus.choices, default=PausedRunStatus.PAUSED)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    resumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # A tenant's page of paused runs (newest first) reads its own rows, never a bigger tenant's.
        indexes = [models.Index(fields=["tenant", "created_at", "id"], name="pausedrun_tenant_created")]

    def __str__(self) -> str:
        return f"{self.agent_name} [{self.status}] {self.id}"
