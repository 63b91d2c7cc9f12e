"""Grants say whether the platform set them: a tenant's staff may not change or delete those.

Existing grants count as the platform's (made by code, the shell or an administrator), except those the
admin's history shows were added by someone who is not a superuser: a tenant's staff then, whose grants
stay theirs to manage (and allow no built-in tool until the platform saves them again).
"""

from django.db import migrations, models

ADDITION = 1  # django.contrib.admin.models.ADDITION


def mark_tenant_made_grants(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    grant_type = apps.get_model("contenttypes", "ContentType").objects.filter(app_label="toolhub", model="grant")
    entries = apps.get_model("admin", "LogEntry").objects.filter(
        content_type__in=grant_type, action_flag=ADDITION, user__is_superuser=False
    )
    made_by_staff = [int(pk) for pk in entries.values_list("object_id", flat=True) if str(pk).isdigit()]
    apps.get_model("toolhub", "Grant").objects.filter(pk__in=made_by_staff).update(set_by_platform=False)


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0022_keyed_approval_hashes"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="grant",
            name="set_by_platform",
            field=models.BooleanField(default=True, editable=False),
        ),
        migrations.RunPython(mark_tenant_made_grants, migrations.RunPython.noop),
    ]
