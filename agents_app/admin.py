"""The admin of model providers (administrators only), agents (developers) and their runs (read-only, cancellable)."""

from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.html import format_html

from agents_app.cancelling import GOING
from agents_app.disclosure import run_shown_disclosure
from agents_app.models import Agent, AgentRun, ModelProvider, tool_choice_problem
from agents_app.selectors import run_children, run_may_operate
from agents_app.services import (
    AGENT_AUDIT_EXCLUDED,
    AGENT_FIELDS,
    AGENT_TENANT_FIXED,
    RunInputError,
    RunStateError,
    run_cancel_by,
    tool_provider_problem,
    unknown_tools_problem,
)
from agents_app.transcript import run_transcript
from toolhub.admin import ReadOnlyAdmin, admin_link, pretty_json
from toolhub.admin_actions import CommentActionMixin, CommentActionPage
from toolhub.admin_governance_audit import GovernanceAudited
from toolhub.admin_helpers import CrossTenantOnly, TenantScopedAdmin, run_trail_link
from toolhub.admin_lists import ExactSearchMixin
from toolhub.admin_tables import admin_table, short_id
from toolhub.models import ToolCall
from toolhub.sagas.selectors import OPERATE_PERMISSION
from toolhub.tenancy import tenant_scope


class ModelProviderForm(forms.ModelForm):
    base_url = forms.URLField(
        required=False,
        assume_scheme="https",
        help_text="The OpenAI-compatible endpoint, e.g. https://api.openai.com/v1.",
    )

    class Meta:
        model = ModelProvider
        fields = "__all__"

    def clean_base_url(self) -> str:
        """A URL without credentials (``user:key@``, a query string): the key goes in ``credential_env``'s variable.

        The URL is stored, shown on this page and written in the governance events of the provider's tenant's
        chain, which its auditors read: a key in it would be kept wherever the key is never to be. The error does
        not repeat the URL.
        """
        url = self.cleaned_data.get("base_url") or ""
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            raise forms.ValidationError(
                "Give the endpoint's URL without credentials or a query string: the API key goes in the "
                "environment variable named in credential_env, never in the URL (it would be stored and audited)."
            )
        return url

    def clean_tenant(self) -> Any:
        """A provider bound to a tenant serves only its agents: refuse while other tenants' (or global) agents use it.

        Their runs would fail ("not configured", ``adapter_for``); move those agents to another provider first.
        """
        tenant = self.cleaned_data.get("tenant")
        if tenant is None or self.instance.pk is None:
            return tenant
        others = Agent.objects.filter(provider_id=self.instance.pk).exclude(tenant_id=tenant.pk)
        names = sorted(
            {agent.tenant.slug if agent.tenant_id else "(global)" for agent in others.select_related("tenant")}
        )
        if names:
            raise forms.ValidationError(
                f"Agents of {', '.join(names[:10])} use this provider; only {tenant.slug}'s agents may use a provider "
                "bound to it. Move those agents to another provider first."
            )
        return tenant


@admin.register(ModelProvider)
class ModelProviderAdmin(GovernanceAudited, CrossTenantOnly, admin.ModelAdmin):
    """Model endpoints and the names of the environment variables holding their keys.

    Where every conversation of their agents goes, so each change is a governance event (``GovernanceAudited``):
    in the chains of the tenant a provider is bound to, the platform's for a shared one (the key is never stored).

    Only people who cross the tenant boundary (superusers, the platform team) see this page at all. A tenant's
    auditors read, in their own trail, where their agents' conversations go (the governance events of a provider
    bound to their tenant: its URL with any key in it written as ``[redacted]``, the variable's name), never a key.
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    form = ModelProviderForm
    list_display = ("name", "kind", "tenant", "model_name", "deadline_seconds", "enabled")
    list_filter = ("kind", "enabled")
    list_select_related = ("tenant",)
    search_fields = ("name", "model_name")
    fieldsets = (
        (None, {"fields": ("name", "kind", "tenant", "enabled")}),
        ("Endpoint", {"fields": ("base_url", "model_name", "credential_env")}),
        ("Time limits", {"fields": ("request_timeout_seconds", "deadline_seconds")}),
        ("Conversation shape", {"fields": ("schema_profile", "note_placement")}),
    )


class AgentForm(forms.ModelForm):
    """Checks the tool names and the provider as the agent service does, so a mistake is caught here.

    An existing agent's tenant is shown, never changed (``AGENT_TENANT_FIXED``, the API's rule): its runs
    stay in its tenant. The field is disabled on the change page, and a request posting another tenant is
    refused with the API's words rather than saved without it.
    """

    #: Who fills the form in: ``AgentAdmin.get_form`` binds the requesting user; ``None`` is trusted code,
    #: as for the service (a script or a test building the form itself).
    requested_by: AbstractBaseUser | None = None

    class Meta:
        model = Agent
        fields = ("tenant", *AGENT_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tenant = self.fields.get("tenant")
        if tenant is not None and self.instance.pk is not None:
            tenant.disabled = True
            tenant.help_text = AGENT_TENANT_FIXED
            for link in ("can_add_related", "can_change_related", "can_delete_related"):
                if hasattr(tenant.widget, link):  # the admin's wrapper: no links to add or edit a tenant from here
                    setattr(tenant.widget, link, False)

    def clean_tenant(self) -> Any:
        """A disabled field ignores what is posted; a request naming another tenant is told why, not obeyed."""
        tenant = self.cleaned_data.get("tenant")
        if self.instance.pk is not None:
            posted = self.data.get(self.add_prefix("tenant"))
            if posted is not None and str(posted) != str(self.instance.tenant_id or ""):
                raise forms.ValidationError(AGENT_TENANT_FIXED)
        return tenant

    def clean_tools(self) -> list[str]:
        """An unknown name is answered as the API answers it (``unknown_tools_problem``), for ``requested_by``."""
        tools = self.cleaned_data["tools"] or []
        if not isinstance(tools, list) or not all(isinstance(name, str) for name in tools):
            raise forms.ValidationError('Give a JSON list of tool names, e.g. ["create_order", "get_order"].')
        tenant = self.cleaned_data.get("tenant") or self.instance.tenant
        kept = self.instance.tools if self.instance.pk is not None else ()
        problem = unknown_tools_problem(tools, by=self.requested_by, tenant=tenant.slug if tenant else None, kept=kept)
        if problem:
            raise forms.ValidationError(problem)
        return tools

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        provider, tenant = cleaned.get("provider"), cleaned.get("tenant")
        if (
            provider is not None
            and provider.tenant_id is not None
            and provider.tenant_id != getattr(tenant, "pk", None)
        ):
            self.add_error("provider", "This provider belongs to another tenant; choose a global one or one of yours.")
        provider_problem = tool_provider_problem(cleaned.get("tool_provider") or "")
        if provider_problem:
            self.add_error("tool_provider", provider_problem)
        problem = tool_choice_problem(cleaned.get("tool_choice") or "", cleaned.get("tools") or [])
        if problem and "tool_choice" not in self.errors:
            self.add_error("tool_choice", problem)
        return cleaned


@admin.register(Agent)
class AgentAdmin(GovernanceAudited, TenantScopedAdmin, admin.ModelAdmin):
    """Agents of the user's tenants and the global ones; only those who cross the boundary change global agents.

    An agent's tools, provider and limits decide what its runs may do: each change is a governance event in its
    tenant's chains (the platform's for a global agent), as the API's writes are (``agents_app.services``).
    """

    small_table = True  # configuration: sorts by any column (GuardedLookups)

    form = AgentForm
    list_display = ("name", "tenant", "provider", "max_tool_calls", "compensate_on_error", "created_at")
    list_filter = ("provider__kind",)
    list_select_related = ("tenant", "provider")
    search_fields = ("name", "description")
    fieldsets = (
        (None, {"fields": ("name", "tenant", "description")}),
        ("Model", {"fields": ("provider", "script")}),
        (
            "Behaviour",
            {"fields": ("system_prompt", "tools", "max_tool_calls", "parallel_tool_calls", "serial_tool_execution")},
        ),
        ("Sampling", {"fields": ("tool_choice", "temperature", "max_tokens", "stream")}),
        ("Progressive disclosure", {"fields": ("tool_search", "group_switching", "tool_provider")}),
        ("Sagas", {"fields": ("compensate_on_error",)}),
        (None, {"fields": ("created_by", "created_at")}),
    )
    readonly_fields = ("created_by", "created_at")
    # Global agents are shown to everyone, changed only by those who cross the boundary (TenantScopedAdmin).
    tenant_field = "tenant__slug"
    global_rows_visible = True
    audit_excluded_fields = AGENT_AUDIT_EXCLUDED  # the script's turns carry tool arguments, sensitive ones too

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        scope = tenant_scope(request.user)
        if db_field.name == "provider":
            # Providers are shown by name only; their URL and credential stay on the administrators' page.
            providers = ModelProvider.objects.filter(enabled=True)
            if not scope.everything:
                providers = providers.filter(tenant__isnull=True) | providers.filter(tenant__slug__in=scope.tenants)
            kwargs["queryset"] = providers
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_form(self, request: HttpRequest, obj: Agent | None = None, change: bool = False, **kwargs: Any) -> Any:
        """The form bound to the requesting user, so that a refused tool name names only tools they may see."""
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"requested_by": request.user})

    def save_model(self, request: HttpRequest, obj: Agent, form: forms.ModelForm, change: bool) -> None:
        if not change and obj.created_by_id is None:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


class CancelRunsForm(forms.Form):
    """Why the runs are stopped; shown in each run's error and recorded in the audit trail."""

    reason = forms.CharField(
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "placeholder": "e.g. looping on the same search"}),
        help_text="Shown in each run's error and recorded in the audit trail with your name.",
    )


@admin.register(AgentRun)
class AgentRunAdmin(ExactSearchMixin, TenantScopedAdmin, CommentActionMixin, ReadOnlyAdmin):
    """Runs of the user's tenants, for operators watching them: the conversation, its calls and where it stopped.

    Operators of a run's tenant (and its own user) may cancel it (``agents_app.cancelling``); auditors only read.
    """

    list_display = ("run_id", "agent", "user", "tenant", "status", "stop_reason", "turn", "created_at", "finished_at")
    list_display_links = ("run_id",)
    list_filter = ("status", "stop_reason", "agent")
    search_fields = ("id",)  # draws the box; ExactSearchMixin matches exactly on indexes
    search_help_text = "A run id, a tenant, a username or an agent's name (exact)."
    uuid_search_fields = ("pk",)
    exact_search_fields = ("tenant", "user__username", "agent__name")
    list_select_related = ("agent", "user")
    show_full_result_count = False
    fieldsets = (
        (
            None,
            {"fields": ("id", "agent", "user", "tenant", "status", "stop_reason", "error", "retryable", "retriers")},
        ),
        ("Transcript", {"fields": ("transcript",)}),
        ("Answer so far (streaming)", {"fields": ("partial_output",)}),
        ("Tool calls", {"fields": ("tool_calls", "audit_trail")}),
        ("Usage", {"fields": ("turn", "lost_steps", "prompt_tokens", "completion_tokens", "shown_context")}),
        ("Visible tools", {"fields": ("shown_disclosure",)}),
        ("Subagents", {"fields": ("parent_link", "depth", "child_runs")}),
        ("From the model", {"fields": ("shown_updates", "blackboard_entries")}),
        (
            "The messages as the model read them",
            {"fields": ("input", "output", "shown_messages"), "classes": ["collapse"]},
        ),
        ("Timing", {"fields": ("created_at", "updated_at", "finished_at")}),
    )
    readonly_fields = tuple(field for _, options in fieldsets for field in options["fields"])
    actions = ("cancel_selected",)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(OPERATE_PERMISSION)

    @admin.action(
        description="Cancel selected runs (stop them; withdraw their calls not yet started)", permissions=["operate"]
    )
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> HttpResponse | None:
        """Ask why on an intermediate page, then cancel each selected run still going through the service."""
        runs = list(queryset.select_related("agent", "user").order_by("created_at"))
        going = [run for run in runs if run.status in GOING and run_may_operate(run, request.user)]
        table = admin_table(
            "selected-runs",
            ("Run", "Agent", "User", "Tenant", "Status", "Turn"),
            ((short_id(r.id), r.agent.name, r.user or "-", r.tenant or "-", r.status, r.turn) for r in going),
            empty="None of the selected runs is still going.",
        )
        page = CommentActionPage(
            title="Cancel runs",
            intro=f"These {len(going)} run(s) will stop: no more model turns; their calls held for approval, queued "
            "or awaiting a result are withdrawn, their child runs cancelled. Calls already running finish; roll a "
            "run back to undo its completed steps. Ended runs among the selected ones are left as they are.",
            table=table,
            submit=f"Cancel {len(going)} run(s)",
        )
        form, confirmation = self.comment_form_or_page(
            request, CancelRunsForm, action="cancel_selected", selected=runs, page=page
        )
        if form is None:
            return confirmation
        cancelled = 0
        for run in going:
            try:
                run_cancel_by(run=run, user=request.user, reason=form.cleaned_data["reason"])
            except RunStateError:
                continue  # it ended meanwhile
            except RunInputError as refused:  # a reason no column can store: none is cancelled
                self.message_user(request, str(refused), messages.ERROR)
                return None
            cancelled += 1
        skipped = len(runs) - cancelled
        self.message_user(
            request, f"Cancelled {cancelled} run(s).", messages.SUCCESS if cancelled else messages.WARNING
        )
        if skipped:
            self.message_user(
                request, f"{skipped} selected run(s) had ended already and were left as they are.", messages.WARNING
            )
        return None

    @admin.display(description="Run", ordering="id")
    def run_id(self, obj: AgentRun) -> str:
        return short_id(obj.id)

    @admin.display(description="Messages (sensitive tool arguments redacted)")
    def shown_messages(self, obj: AgentRun) -> str:
        return pretty_json(obj.messages)

    @admin.display(description="What the run can see (groups, unfolded facades, search hits, exclusive mode)")
    def shown_disclosure(self, obj: AgentRun) -> str:
        return pretty_json(run_shown_disclosure(obj))

    @admin.display(description="Context")
    def shown_context(self, obj: AgentRun) -> str:
        return pretty_json(obj.context)

    @admin.display(description="Transcript")
    def transcript(self, obj: AgentRun) -> str:
        transcript = run_transcript(obj)
        compensations = admin_table(
            "run-compensations",
            ("Step #", "Step", "Compensation", "Status", "Attempts", "Last error"),
            (
                (
                    c.sequence,
                    c.step_tool,
                    c.tool_name,
                    c.status,
                    f"{c.attempts} / {c.max_attempts}",
                    c.last_error or "-",
                )
                for c in transcript.compensations
            ),
        )
        return render_to_string(
            "admin/agents_app/agentrun/transcript.html",
            {"run": obj, "transcript": transcript, "compensations_table": compensations},
        )

    @admin.display(description="Retried by (barred from approving its calls)")
    def retriers(self, obj: AgentRun) -> str:
        """Who retried the run or a run above it besides its user (``retried_by``): four eyes bar them."""
        return ", ".join(user.get_username() for user in obj.retried_by.order_by("pk")) or "-"

    @admin.display(description="Started by")
    def parent_link(self, obj: AgentRun) -> str:
        if obj.parent_run_id is None:
            return "-"
        return format_html(
            "{} (call {})",
            admin_link("admin:agents_app_agentrun_change", obj.parent_run_id, short_id(obj.parent_run_id)),
            admin_link("admin:toolhub_toolcall_change", obj.parent_call_id, short_id(obj.parent_call_id)),
        )

    @admin.display(description="Subagent runs")
    def child_runs(self, obj: AgentRun) -> str:
        return admin_table(
            "run-children",
            ("Run", "Agent", "Status", "Parent call"),
            (
                (
                    admin_link("admin:agents_app_agentrun_change", child.pk, short_id(child.pk)),
                    child.agent.name,
                    child.status,
                    admin_link("admin:toolhub_toolcall_change", child.parent_call_id, short_id(child.parent_call_id)),
                )
                for child in run_children(obj)
            ),
        )

    @admin.display(description="Messages and progress the model sent (communicate, progress)")
    def shown_updates(self, obj: AgentRun) -> str:
        return pretty_json(obj.updates)

    @admin.display(description="Blackboard (own entries)")
    def blackboard_entries(self, obj: AgentRun) -> str:
        return admin_table(
            "run-blackboard",
            ("Name", "Kind", "Bytes", "Produced by call"),
            (
                (entry.name, entry.kind, entry.size, short_id(entry.produced_by_call_id))
                for entry in obj.blackboard.order_by("id")[:200]
            ),
        )

    @admin.display(description="Audit trail")
    def audit_trail(self, obj: AgentRun) -> str:
        return run_trail_link(obj.id)

    @admin.display(description="Tool calls")
    def tool_calls(self, obj: AgentRun) -> str:
        calls = ToolCall.objects.filter(run_id=obj.id).order_by("turn", "position", "created_at")
        return admin_table(
            "run-tool-calls",
            ("Call", "Turn", "Tool", "Kind", "Status"),
            (
                (
                    admin_link("admin:toolhub_toolcall_change", call.pk, short_id(call.pk)),
                    call.turn,
                    call.tool_name,
                    call.kind,
                    call.status,
                )
                for call in calls.only("id", "turn", "position", "tool_name", "kind", "status", "created_at")
            ),
        )
