"""The audit trail: hash-chained events, their chains' heads, signed checkpoints and verifications."""

from typing import Any

from django.db import models

from toolhub.visible import visible_text


class AuditChainHead(models.Model):
    """The newest hash of one audit chain; locking this row serializes appends to the chain."""

    chain = models.PositiveBigIntegerField(primary_key=True)
    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64, blank=True)
    #: The hash before the newest append: the statement that appends reads it back to chain its events.
    previous_hash = models.CharField(max_length=64, blank=True, default="")

    def __str__(self) -> str:
        return f"chain {self.chain} @ {self.seq}"


class AuditEvent(models.Model):
    """One append-only, hash-chained record of something that happened to a call or a run.

    ``data`` is canonical JSON text, hashed exactly as stored, so verification from the database's
    own rows reproduces every hash on SQLite and PostgreSQL alike. Strings (tool, actor, tenant)
    are copied so that the record survives renames and deletions.
    """

    #: The platform's chains are below ``toolhub.audit_hash.TENANT_SHARDS``; a tenant's are its own.
    chain = models.PositiveBigIntegerField()
    seq = models.PositiveBigIntegerField()
    event_type = models.CharField(max_length=64)
    call_id = models.UUIDField(null=True, blank=True, db_index=True)
    run_id = models.UUIDField(null=True, blank=True, db_index=True)
    tool_name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, blank=True)
    tenant = models.CharField(max_length=100, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(db_index=True)
    data = models.TextField(default="{}")
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["chain", "seq"], name="audit_chain_seq_unique")]
        indexes = [
            models.Index(fields=["tool_name", "created_at"], name="audit_tool_created"),
            models.Index(fields=["tenant", "created_at"], name="audit_tenant_created"),
            models.Index(fields=["actor", "created_at"], name="audit_actor_created"),
            # Equality only (the audit browser's filter): no ``varchar_pattern_ops`` twin for LIKE, which
            # ``db_index=True`` would add on PostgreSQL and every append would maintain.
            models.Index(fields=["event_type"], name="audit_event_type"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.event_type} {visible_text(self.tool_name)}"  # a row's text is for pages

    @property
    def payload(self) -> Any:
        import json

        return json.loads(self.data)


class AuditCheckpoint(models.Model):
    """Every audit chain's head at one moment, HMAC-signed with a key kept outside the database.

    ``body`` is canonical JSON text (``seq``, ``created_at``, ``heads``; for a delta, ``base``: the full
    checkpoint whose heads it updates, see ``toolhub.checkpoints``) signed exactly as stored.
    Checkpoints are numbered 1, 2, 3, ... so a deleted one leaves a gap; like the events they may only
    be appended (the application's role holds SELECT and INSERT, and triggers refuse the rest), each
    numbered after the newest, at most a bounded jump beyond it (migration 0028).
    """

    seq = models.PositiveBigIntegerField(unique=True)
    created_at = models.DateTimeField()
    body = models.TextField()
    signature = models.CharField(max_length=64)
    #: Where to look for a checkpoint a person signed over problems with; what counts is its signed body.
    acknowledged = models.BooleanField(default=False, db_index=True)

    class Meta:
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"audit checkpoint #{self.seq}"


class AuditVerification(models.Model):
    """One run of ``verify_audit``: when, how many events, and whether every chain verified.

    The console shows the newest beside the newest checkpoint, so an auditor sees when the trail was
    last proven intact without running the check; a tenant's auditors also see the newest run over
    their tenant's own chains (``verify_audit --tenant``), with its count and problems.
    """

    #: Whose chains were verified: a tenant's slug, or empty for the whole trail.
    tenant = models.CharField(max_length=100, blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    events_checked = models.PositiveBigIntegerField()
    ok = models.BooleanField()
    #: Failed only for what could not be checked (``UNVERIFIABLE``): not proven, but no evidence of tampering.
    #: False on records kept before the kinds were (they read "failed", as they did).
    unverifiable = models.BooleanField(
        default=False, help_text="Failed only because something could not be checked: no problem found was tampering."
    )
    problems = models.TextField(blank=True, help_text="The first problems found, one a line (bounded).")
    checkpoint_seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-finished_at"]
        get_latest_by = "finished_at"
        indexes = [
            models.Index(fields=["tenant", "-finished_at"], name="audit_verification_newest"),
            # Checkpoints deleted past what any run compared with (``checkpoint_checks._deleted_newest``): a range read.
            models.Index(fields=["checkpoint_seq"], name="audit_verification_checkpoint"),
        ]

    @property
    def state(self) -> str:
        """``verified``, ``unverifiable`` (not proven, nothing found altered) or ``failed`` (found tampered)."""
        if self.ok:
            return "verified"
        return "unverifiable" if self.unverifiable else "failed"

    def __str__(self) -> str:
        return f"verification of {self.finished_at:%Y-%m-%d %H:%M}: {self.state}"
