"""The admin of agents (configured by operators) and of their runs (read-only, for watching)."""

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from agents_app.models import Agent, AgentRun
from toolhub.admin import ReadOnlyAdmin, admin_link, pretty_json
from toolhub.admin_helpers import TenantScopedAdmin
from toolhub.models import ToolCall
from toolhub.tools.registry import registry


class AgentForm(forms.ModelForm):
    """Checks the tool names as the agent service does, so a typo is caught here and not mid-run."""

    base_url = forms.URLField(required=False, assume_scheme="https", help_text="The OpenAI-compatible endpoint.")

    class Meta:
        model = Agent
        fields = (
            "name",
            "description",
            "provider",
            "base_url",
            "model_name",
            "api_key_env",
            "script",
            "system_prompt",
            "tools",
            "max_tool_calls",
            "compensate_on_error",
            "parallel_tool_calls",
        )

    def clean_tools(self) -> list[str]:
        tools = self.cleaned_data["tools"] or []
        if not isinstance(tools, list) or not all(isinstance(name, str) for name in tools):
            raise forms.ValidationError('Give a JSON list of tool names, e.g. ["create_order", "get_order"].')
        unknown = [name for name in tools if name not in registry]
        if unknown:
            raise forms.ValidationError(
                f"Unknown tool(s): {', '.join(unknown)}. Known tools: {', '.join(registry.names())}."
            )
        return tools


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    """Agents: model settings, prompt, tools and limits (API keys stay in the environment)."""

    form = AgentForm
    list_display = ("name", "provider", "model_name", "max_tool_calls", "compensate_on_error", "created_at")
    list_filter = ("provider",)
    search_fields = ("name", "description", "model_name")
    fieldsets = (
        (None, {"fields": ("name", "description")}),
        ("Model", {"fields": ("provider", "base_url", "model_name", "api_key_env", "script")}),
        ("Behaviour", {"fields": ("system_prompt", "tools", "max_tool_calls", "parallel_tool_calls")}),
        ("Sagas", {"fields": ("compensate_on_error",)}),
        (None, {"fields": ("created_by", "created_at")}),
    )
    readonly_fields = ("created_by", "created_at")

    def save_model(self, request: HttpRequest, obj: Agent, form: forms.ModelForm, change: bool) -> None:
        if not change and obj.created_by_id is None:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(AgentRun)
class AgentRunAdmin(TenantScopedAdmin, ReadOnlyAdmin):
    """Runs of the user's tenants, for operators watching them: the conversation, its calls and where it stopped."""

    list_display = ("id", "agent", "user", "tenant", "status", "stop_reason", "turn", "created_at", "finished_at")
    list_filter = ("status", "stop_reason", "agent")
    search_fields = ("input", "tenant", "user__username", "agent__name")
    list_select_related = ("agent", "user")
    show_full_result_count = False
    fieldsets = (
        (None, {"fields": ("id", "agent", "user", "tenant", "status", "stop_reason", "error", "retryable")}),
        ("Conversation", {"fields": ("input", "output", "shown_messages")}),
        ("Tool calls", {"fields": ("tool_calls",)}),
        ("Usage", {"fields": ("turn", "prompt_tokens", "completion_tokens", "shown_context")}),
        ("Timing", {"fields": ("created_at", "updated_at", "finished_at")}),
    )
    readonly_fields = tuple(field for _, options in fieldsets for field in options["fields"])

    @admin.display(description="Messages (sensitive tool arguments redacted)")
    def shown_messages(self, obj: AgentRun) -> str:
        return pretty_json(obj.messages)

    @admin.display(description="Context")
    def shown_context(self, obj: AgentRun) -> str:
        return pretty_json(obj.context)

    @admin.display(description="Tool calls")
    def tool_calls(self, obj: AgentRun) -> str:
        calls = ToolCall.objects.filter(run_id=obj.id).order_by("turn", "position", "created_at")
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    admin_link("admin:toolhub_toolcall_change", call.pk, call.pk),
                    call.turn,
                    call.tool_name,
                    call.kind,
                    call.status,
                )
                for call in calls.only("id", "turn", "position", "tool_name", "kind", "status", "created_at")
            ),
        )
        return format_html(
            '<table class="toolhub-table" id="run-tool-calls"><thead><tr><th>Call</th><th>Turn</th><th>Tool</th>'
            "<th>Kind</th><th>Status</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )
