"""Argument versions on approval requests (an edit opens a new round) and Standard Webhooks message ids."""

import uuid

from django.db import migrations, models
from django.db.models import OuterRef, Subquery

import approvals.models


def fill_versions(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    """Existing requests: the version under approval is the call's arguments, bound by the call's hash."""
    request_model = apps.get_model("approvals", "ApprovalRequest")
    call = apps.get_model("toolhub", "ToolCall").objects.filter(pk=OuterRef("call_id"))
    request_model.objects.update(
        original_arguments=Subquery(call.values("arguments")[:1]),
        arguments=Subquery(call.values("arguments")[:1]),
        arguments_hash=Subquery(call.values("approval_hash")[:1]),
    )


def fill_message_ids(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    delivery_model = apps.get_model("approvals", "WebhookDelivery")
    for pk in delivery_model.objects.filter(message_id__isnull=True).values_list("pk", flat=True).iterator():
        delivery_model.objects.filter(pk=pk).update(message_id=f"msg_{uuid.uuid4().hex}")


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0004_approver_permission"),
        ("toolhub", "0001_initial"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="approvaldecision",
            name="one_decision_per_operator",
        ),
        migrations.AddField(
            model_name="approvaldecision",
            name="arguments_hash",
            field=models.CharField(
                blank=True, help_text="The version of the arguments this decision was taken on.", max_length=64
            ),
        ),
        migrations.AddField(
            model_name="approvalrequest",
            name="arguments",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="The version under approval: exactly what runs once it is approved.",
            ),
        ),
        migrations.AddField(
            model_name="approvalrequest",
            name="arguments_hash",
            field=models.CharField(
                blank=True, help_text="The version's binding: a hash of (tool, tool version, arguments).", max_length=64
            ),
        ),
        migrations.AddField(
            model_name="approvalrequest",
            name="original_arguments",
            field=models.JSONField(blank=True, default=dict, help_text="The arguments as the model sent them."),
        ),
        migrations.AlterField(
            model_name="approvalrequest",
            name="round",
            field=models.PositiveSmallIntegerField(
                default=1,
                help_text="Rises with every edit and when the request is reopened; approvals count within one round.",
            ),
        ),
        migrations.AddConstraint(
            model_name="approvaldecision",
            constraint=models.UniqueConstraint(
                condition=models.Q(("decision", "reject"), _negated=True),
                fields=("request", "round", "decided_by"),
                name="one_approval_per_operator_and_round",
            ),
        ),
        migrations.RunPython(fill_versions, migrations.RunPython.noop),
        migrations.AddField(
            model_name="webhookdelivery",
            name="message_id",
            field=models.CharField(editable=False, max_length=64, null=True),
        ),
        migrations.RunPython(fill_message_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="webhookdelivery",
            name="message_id",
            field=models.CharField(default=approvals.models.new_message_id, editable=False, max_length=64, unique=True),
        ),
    ]
