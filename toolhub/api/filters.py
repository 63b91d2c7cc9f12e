"""``django-filter`` filter sets of the core API's lists; they narrow a queryset already cut to the caller's tenants."""

import django_filters

from toolhub.models import CallStatus, ToolCall, ToolDefinition

__all__ = ["CallFilter", "ToolFilter", "choice_help"]


def choice_help(values: list[str]) -> str:
    return f"One of {', '.join(values)}."


class CallFilter(django_filters.FilterSet):
    """``?run=<run id>&tool=<name>&status=<status>``; an unknown status or a malformed run id is a 400."""

    run = django_filters.UUIDFilter(field_name="run_id", help_text="A run id.")
    tool = django_filters.CharFilter(field_name="tool_name", help_text="A tool name.")
    status = django_filters.ChoiceFilter(choices=CallStatus.choices, help_text=choice_help(CallStatus.values))

    class Meta:
        model = ToolCall
        fields = ["run", "tool", "status"]


class ToolFilter(django_filters.FilterSet):
    """``?group=<group>&enabled=true|false`` over the catalogue's JSON list (not the provider exports)."""

    group = django_filters.CharFilter(help_text="The tool group (as operators set it).")
    enabled = django_filters.BooleanFilter(help_text="Switched on or off by operators.")

    class Meta:
        model = ToolDefinition
        fields = ["group", "enabled"]
