"""AgentRun.delegated_by: the agents of the runs that started a subagent's run, for their denies to hold in it."""

from typing import Any

from django.db import migrations, models


def fill_delegated_by(apps: Any, schema_editor: Any) -> None:
    """Children that exist get their ancestors' agents, a level at a time (a parent's list is set before its child's)."""
    run_model = apps.get_model("agents_app", "AgentRun")
    levels = run_model.objects.filter(parent_run__isnull=False).order_by("-depth").values_list("depth", flat=True)
    deepest = levels.first() or 0
    for depth in range(1, deepest + 1):
        for child in run_model.objects.filter(depth=depth, parent_run__isnull=False).select_related(
            "parent_run__agent"
        ):
            parent = child.parent_run
            child.delegated_by = [*(parent.delegated_by or []), parent.agent.name]
            child.save(update_fields=["delegated_by"])


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0015_agent_call_limit_conversation_size"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentrun",
            name="delegated_by",
            field=models.JSONField(
                blank=True,
                default=list,
                editable=False,
                help_text="The names of the agents of the runs that started this one, root first: an explicit deny "
                "of a tool to any of them also holds here (a parent denied a tool does not get it through a subagent).",
            ),
        ),
        migrations.RunPython(fill_delegated_by, migrations.RunPython.noop),
    ]
