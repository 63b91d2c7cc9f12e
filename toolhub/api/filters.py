"""``django-filter`` filter sets of the core API's lists; they narrow a queryset already cut to the caller's tenants."""

import django_filters
from django.db.models import QuerySet

from toolhub.caller_view import caller_view_for
from toolhub.disclosure.groups import group_names_read, reader_group_namer
from toolhub.models import CallStatus, ToolCall, ToolDefinition

__all__ = ["CallFilter", "ToolFilter", "choice_help"]


def choice_help(values: list[str]) -> str:
    return f"One of {', '.join(values)}."


class CallFilter(django_filters.FilterSet):
    """``?run=<run id>&tool=<name>&status=<status>``; an unknown status or a malformed run id is a 400."""

    run = django_filters.UUIDFilter(field_name="run_id", help_text="A run id.")
    tool = django_filters.CharFilter(field_name="tool_name", help_text="A tool name.")
    status = django_filters.ChoiceFilter(
        choices=CallStatus.choices, help_text=choice_help(CallStatus.values), method="filter_status"
    )

    class Meta:
        model = ToolCall
        fields = ["run", "tool", "status"]

    def filter_status(self, queryset: QuerySet[ToolCall], name: str, value: str) -> QuerySet[ToolCall]:
        """The rows that read with ``value`` for the requesting user (``toolhub.caller_view``), as they are shown."""
        view = caller_view_for(self.request)
        if view is None or view.sees_truth:
            return queryset.filter(status=value)
        tenants = queryset.filter(status=CallStatus.DENIED).order_by().values_list("tenant", flat=True).distinct()
        return queryset.filter(view.status_is(value, list(tenants)))


class ToolFilter(django_filters.FilterSet):
    """``?group=<group>&enabled=true|false`` over the catalogue's JSON list (not the provider exports).

    ``enabled`` takes ``true`` or ``false`` and nothing else: any other value is a 400 naming it, where a
    ``BooleanFilter`` would ignore it and answer the whole catalogue as if it had been honoured.
    """

    group = django_filters.CharFilter(help_text="The tool group (as operators set it).", method="filter_group")
    enabled = django_filters.ChoiceFilter(
        choices=[("true", "true"), ("false", "false")],
        method="filter_enabled",
        help_text="true or false: switched on or off by operators.",
    )

    class Meta:
        model = ToolDefinition
        fields = ["group", "enabled"]

    def filter_group(self, queryset: QuerySet[ToolDefinition], name: str, value: str) -> QuerySet[ToolDefinition]:
        """The tools of the group ``value`` names, when the caller reads that name (``group_names_read``).

        A group whose name is withheld from them matches nothing, as a group that does not exist.
        """
        if group_names_read([value], reader_group_namer(getattr(self.request, "user", None)))[value] != value:
            return queryset.none()
        return queryset.filter(group=value)

    def filter_enabled(self, queryset: QuerySet[ToolDefinition], name: str, value: str) -> QuerySet[ToolDefinition]:
        return queryset.filter(enabled=value == "true")
