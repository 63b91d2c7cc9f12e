"""The core records: the tool catalogue, governed tool calls, tenants and the audit trail."""

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.signals import post_delete
from django.dispatch import receiver


def refuse_identity_change(instance: models.Model, field: str) -> None:
    """Refuse saving ``instance`` with another ``field`` than stored: other rows and the code name it by that value.

    A rename would leave them naming nothing (or, once the old value is taken again, someone else).
    """
    from django.core.exceptions import ValidationError

    if instance.pk is None:
        return
    stored = type(instance)._default_manager.filter(pk=instance.pk).values_list(field, flat=True).first()
    if stored is not None and stored != getattr(instance, field):
        label = type(instance)._meta.verbose_name
        raise ValidationError(
            {field: f"A {label}'s {field} cannot change once it exists (rows name it {stored!r}); keep {stored!r}."}
        )


class Tenant(models.Model):
    """A customer or organisation whose data tools act on; runs carry exactly one.

    The slug is the tenant's identity wherever a row names it (calls, runs, approval requests, audit events and
    chains, sagas, remote MCP credentials, the built-in tools' workspace directory): it never changes once the
    tenant exists, and a deleted tenant's slug is retired (``RetiredTenantSlug``), never issued again, so no
    tenant reaches another's rows by taking its name.
    """

    #: Fixed once the row exists (``refuse_identity_change``; the admin shows them read-only on a change).
    identity_fields = ("slug",)

    slug = models.SlugField(unique=True, help_text="Fixed once the tenant exists: every row of the tenant names it.")
    name = models.CharField(max_length=200)
    #: The first of this tenant's audit chains (``toolhub.audit_hash.tenant_chain_base``), derived from the
    #: slug; unique, so no two tenants' events can share a chain (NULL only for an older tenant whose slug
    #: collided when this column was added).
    audit_chain_base = models.PositiveBigIntegerField(unique=True, null=True, editable=False)

    class Meta:
        permissions = [("cross_tenant", "Can see and act on every tenant's data (platform team)")]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        """Refuse a changed slug, a retired one, or one whose audit chains would coincide with another tenant's."""
        from django.core.exceptions import ValidationError

        from toolhub.audit_hash import tenant_chain_base

        self._refuse_another_identity()
        base = tenant_chain_base(self.slug)
        if Tenant.objects.filter(audit_chain_base=base).exclude(pk=self.pk).exists():
            raise ValidationError(
                {"slug": "This slug's audit chains would coincide with another tenant's; choose another."}
            )

    def save(self, *args: Any, **kwargs: Any) -> None:
        from toolhub.audit_hash import tenant_chain_base

        self._refuse_another_identity()
        self.audit_chain_base = tenant_chain_base(self.slug)
        super().save(*args, **kwargs)

    def _refuse_another_identity(self) -> None:
        """A slug stays its tenant's: it never changes, and a deleted tenant's (or its chains) is never reused."""
        from django.core.exceptions import ValidationError

        from toolhub.audit_hash import tenant_chain_base

        refuse_identity_change(self, "slug")
        if Tenant.objects.filter(pk=self.pk).exists():
            return
        retired = models.Q(slug=self.slug) | models.Q(audit_chain_base=tenant_chain_base(self.slug))
        if RetiredTenantSlug.objects.filter(retired).exists():
            raise ValidationError(
                {
                    "slug": "This slug (or its audit chains) belonged to a deleted tenant whose rows still name it; "
                    "choose another."
                }
            )


class RetiredTenantSlug(models.Model):
    """The slug of a deleted tenant: its calls, runs, audit events and files still name it, so no tenant takes it."""

    slug = models.SlugField(unique=True)
    audit_chain_base = models.PositiveBigIntegerField(null=True, editable=False)
    retired_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


@receiver(post_delete, sender=Tenant)
def _retire_slug(sender: type[Tenant], instance: Tenant, **kwargs: Any) -> None:
    """Retire a deleted tenant's slug, whatever deleted it (a page, a bulk action, a cascade)."""
    RetiredTenantSlug.objects.get_or_create(
        slug=instance.slug, defaults={"audit_chain_base": instance.audit_chain_base}
    )


class TenantMembership(models.Model):
    """Which tenants a user may act for; the boundary picks the run's tenant from these, never the model."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tenant_memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="unique_tenant_membership")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant}"


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
STEP_KINDS = frozenset({CallKind.CALL, CallKind.API, CallKind.MCP})


class ToolCall(models.Model):
    """One governed call of a tool, whoever asked for it; its status history is in the audit trail."""

    #: Set by a write guarded by the governance stamp (``toolhub.calls``), not stored: the stamp read after the
    #: write's locks (PostgreSQL), and whether a governance change committed while it waited for them.
    stamp_after_write: int | None = None
    governance_moved: bool = False

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=CallKind.choices, default=CallKind.CALL)
    tool_name = models.CharField(max_length=200)
    tool_version = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=20, choices=CallStatus.choices)
    arguments = models.JSONField(default=dict, blank=True)
    raw_arguments = models.TextField(blank=True)
    context = models.JSONField(default=dict, blank=True)
    tenant = models.CharField(max_length=100, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    agent_name = models.CharField(max_length=100, blank=True)
    run_id = models.UUIDField(null=True, blank=True)
    turn = models.PositiveIntegerField(default=0)
    position = models.PositiveIntegerField(default=0)
    model_call_id = models.CharField(max_length=100, blank=True)
    saga_id = models.CharField(max_length=100, blank=True)
    approval_hash = models.CharField(max_length=64, blank=True)
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
            # Status + newest first serves the console's status filter; the sweeper's few queued rows too.
            models.Index(fields=["status", "created_at"], name="toolcall_status_created"),
            models.Index(fields=["tool_name", "created_at"], name="toolcall_tool_created"),
            models.Index(fields=["tenant", "created_at"], name="toolcall_tenant_created"),
            models.Index(fields=["saga_id"], name="toolcall_saga"),
            # The provider's id of the tool call: auditors find a call by it (the correlation id).
            models.Index(fields=["model_call_id"], name="toolcall_model_call"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} [{self.status}] {self.id}"

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


class GovernanceVersion(models.Model):
    """One row whose stamp database triggers change with every governance change (``toolhub.governance``)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    stamp = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"governance @ {self.stamp}"


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
        return f"#{self.pk} {self.event_type} {self.tool_name}"

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
    problems = models.TextField(blank=True, help_text="The first problems found, one a line (bounded).")
    checkpoint_seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-finished_at"]
        get_latest_by = "finished_at"
        indexes = [models.Index(fields=["tenant", "-finished_at"], name="audit_verification_newest")]

    def __str__(self) -> str:
        return f"verification of {self.finished_at:%Y-%m-%d %H:%M}: {'ok' if self.ok else 'FAILED'}"


class ToolGroup(models.Model):
    """A named set of tools granted together, with the capabilities they exercise.

    Members come from the code (``@tool(group="ledger")``) and from operators (``extra_tools``).
    A group may restrict who approves its calls (``approver_group`` and/or ``approver_permission``) and
    name a fallback group that may decide once a request has waited ``escalate_after_seconds``.
    """

    #: Fixed once the row exists (``refuse_identity_change``): the code names a tool's groups by name
    #: (``@tool(group=...)``) while grants, rules and approver restrictions point at the row.
    identity_fields = ("name",)

    name = models.SlugField(
        max_length=100, unique=True, help_text="Fixed once the group exists: the code names its tools' groups by it."
    )
    description = models.TextField(blank=True)
    provider = models.CharField(max_length=100, blank=True, help_text="Where the tools come from, e.g. 'demo'.")
    capabilities = models.JSONField(
        default=list, blank=True, help_text="Capability permissions, e.g. ['internet_access', 'money_movement']."
    )
    extra_tools = models.JSONField(default=list, blank=True, help_text="Tool names added by operators.")
    system_prompt_addition = models.TextField(
        blank=True,
        help_text="Added to the system prompt of a run while this group is active and one of its tools shown.",
    )
    active_by_default = models.BooleanField(
        default=True, help_text="Without activation rules: whether the group is active when a run starts."
    )
    activation_rules = models.JSONField(
        default=list,
        blank=True,
        help_text='Activate only for runs matching one rule, e.g. [{"roles": ["operators"]}, {"tenants": ["acme"], '
        '"agents": ["support"], "context": {"channel": "web"}}]; empty: active_by_default decides.',
    )
    approver_group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Only members of this Django group may decide this group's approval requests.",
    )
    approver_permission = models.CharField(
        max_length=150,
        blank=True,
        help_text="Only users with this permission ('app_label.codename') may decide this group's approval requests.",
    )
    escalation_group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Fallback approvers once a request has waited escalate_after_seconds.",
    )
    escalate_after_seconds = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """A mistyped approver permission would leave nobody able to decide: refuse one that does not exist."""
        from django.contrib.auth.models import Permission
        from django.core.exceptions import ValidationError

        from toolhub.disclosure.capabilities import capability_name_problem
        from toolhub.disclosure.groups import activation_rules_problem

        refuse_identity_change(self, "name")
        problem = activation_rules_problem(self.activation_rules)
        if problem:
            raise ValidationError({"activation_rules": problem})
        problem = capability_name_problem(self.capabilities)
        if problem:
            raise ValidationError({"capabilities": problem})
        if not self.approver_permission:
            return
        app_label, _, codename = self.approver_permission.partition(".")
        if not Permission.objects.filter(content_type__app_label=app_label, codename=codename).exists():
            raise ValidationError(
                {"approver_permission": f"No permission {self.approver_permission!r}; use 'app_label.codename'."}
            )

    def save(self, *args: Any, **kwargs: Any) -> None:
        refuse_identity_change(self, "name")
        super().save(*args, **kwargs)


class GrantEffect(models.TextChoices):
    ALLOW = "allow"
    DENY = "deny"


class Grant(models.Model):
    """Allows or denies one tool or a tool group to one principal: a user, a Django group, a tenant or an agent.

    Deny wins over allow. A run may use a tool only if both its user's side (user, their Django
    groups, their tenant) and its agent are allowed and neither is denied.
    """

    effect = models.CharField(max_length=8, choices=GrantEffect.choices, default=GrantEffect.ALLOW)
    tool_group = models.ForeignKey(ToolGroup, null=True, blank=True, on_delete=models.CASCADE, related_name="grants")
    tool_name = models.CharField(max_length=200, blank=True, help_text="A single tool, instead of a group.")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="tool_grants"
    )
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="tool_grants")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="tool_grants")
    agent_name = models.CharField(max_length=100, blank=True)
    agent_tenant = models.ForeignKey(
        Tenant,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agent_tool_grants",
        help_text="With an agent name: the grant holds only for that agent's calls in this tenant. "
        "Empty: for the agent's calls in every tenant.",
    )
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: Made or last changed by someone who crosses tenants (or by code): a tenant's staff neither change nor
    #: delete it (a platform's deny holds), and only such a grant allows a built-in tool.
    set_by_platform = models.BooleanField(default=True, editable=False)

    class Meta:
        constraints = [
            models.CheckConstraint(
                name="grant_names_one_target",
                condition=(
                    (models.Q(tool_group__isnull=False) & models.Q(tool_name=""))
                    | (models.Q(tool_group__isnull=True) & ~models.Q(tool_name=""))
                ),
            ),
            models.CheckConstraint(
                name="grant_names_one_principal",
                condition=(
                    models.Q(user__isnull=False, group__isnull=True, tenant__isnull=True, agent_name="")
                    | models.Q(user__isnull=True, group__isnull=False, tenant__isnull=True, agent_name="")
                    | models.Q(user__isnull=True, group__isnull=True, tenant__isnull=False, agent_name="")
                    | (models.Q(user__isnull=True, group__isnull=True, tenant__isnull=True) & ~models.Q(agent_name=""))
                ),
            ),
            models.CheckConstraint(
                name="grant_agent_tenant_needs_agent",
                condition=models.Q(agent_tenant__isnull=True) | ~models.Q(agent_name=""),
            ),
        ]

    def __str__(self) -> str:
        target = self.tool_name or f"group {self.tool_group}"
        principal = self.user or self.group or self.tenant or f"agent {self.agent_name}"
        if self.agent_name and self.agent_tenant_id:
            principal = f"{principal} in {self.agent_tenant}"
        return f"{self.effect} {target} to {principal}"


# Defined beside their services, registered under this app.
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool  # noqa: E402, F401
