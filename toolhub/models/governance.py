"""What governs calls at run time: tool groups, grants and the stamp that says when any of it changed."""

from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from toolhub.models.tenants import Tenant, refuse_identity_change
from toolhub.withheld_names import withheld_name


class GovernanceVersion(models.Model):
    """One row whose stamp database triggers change with every governance change (``toolhub.governance``)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    stamp = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"governance @ {self.stamp}"


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
        # Not SET_NULL: emptying it would let every operator decide what only this group might.
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Only members of this Django group may decide this group's approval requests.",
    )
    #: What the admin's delete page says to do first when these rows keep a row from being deleted.
    protected_because = {
        "approver_group": "Tool groups name this group as their only approvers: choose another approver group for "
        "them first (emptying it would let every operator decide).",
    }
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
    # At least 1: the request's terms read 0 as unset (ESCALATE_AFTER_SECONDS), never as "escalate at once".
    escalate_after_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Seconds a request waits before its escalation group may decide; empty: ESCALATE_AFTER_SECONDS.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        # An admin page names a group its viewer may not see as its columns do (``toolhub.withheld_names``).
        return withheld_name(self) or self.name

    def clean(self) -> None:
        """A mistyped approver permission would leave nobody able to decide: refuse one that does not exist."""
        from django.contrib.auth.models import Permission
        from django.core.exceptions import ValidationError

        from toolhub.disclosure.capabilities import capability_name_problem
        from toolhub.disclosure.groups import activation_rules_problem

        refuse_identity_change(self, "name")
        problems = self.reference_problems()
        if problems:
            raise ValidationError(problems)
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

    def reference_problems(self) -> dict[str, str]:
        """Extra tools that are no list of registered tools: a deny or a rule on the group misses the tool meant.

        A string is read as its characters. Checked when saved and by ``manage.py check``.
        """
        from toolhub.references import tool_names_problem

        problem = tool_names_problem(self.extra_tools or [])
        return {"extra_tools": problem} if problem else {}


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

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        problems = self.reference_problems()
        if problems:
            raise ValidationError(problems)

    def reference_problems(self) -> dict[str, str]:
        """A tool name no registered tool has: a deny with a typo denies nothing.

        Checked when saved and by ``manage.py check`` (a tool removed from the code).
        """
        from toolhub.references import tool_name_problem

        problem = tool_name_problem(self.tool_name) if self.tool_name else None
        return {"tool_name": problem} if problem else {}

    def __str__(self) -> str:
        target = self.tool_name or f"group {self.tool_group}"
        principal = self.user or self.group or self.tenant or f"agent {self.agent_name}"
        if self.agent_name and self.agent_tenant_id:
            principal = f"{principal} in {self.agent_tenant}"
        return f"{self.effect} {target} to {principal}"
