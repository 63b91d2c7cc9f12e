"""Grants say whether the platform set them: a tenant's staff may not change or delete those.

Existing grants count as the platform's (made by code, the shell or someone who crosses tenants), except
those whose last addition or change in the admin's history was by someone who does not cross tenants
(neither a superuser nor holding ``toolhub.cross_tenant``, directly or through a group): a tenant's staff
then, whose grants stay theirs to manage (and allow no built-in tool until the platform saves them again).
A grant a tenant's developer changed before this upgrade (a platform deny flipped to allow) is so theirs.
"""

from django.conf import settings
from django.db import migrations, models

ADDITION, CHANGE = 1, 2  # django.contrib.admin.models


def mark_tenant_made_grants(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    grant_type = apps.get_model("contenttypes", "ContentType").objects.filter(app_label="toolhub", model="grant")
    entries = apps.get_model("admin", "LogEntry").objects.filter(
        content_type__in=grant_type, action_flag__in=(ADDITION, CHANGE)
    )
    last_author: dict[int, int] = {}
    for object_id, user_id in entries.order_by("action_time", "pk").values_list("object_id", "user_id"):
        if str(object_id).isdigit():
            last_author[int(object_id)] = user_id  # the latest addition or change wins
    crossing = _crossing_users(apps)
    by_staff = [pk for pk, user_id in last_author.items() if user_id not in crossing]
    apps.get_model("toolhub", "Grant").objects.filter(pk__in=by_staff).update(set_by_platform=False)


def _crossing_users(apps) -> set[int]:  # noqa: ANN001 - migration signature
    """Superusers and holders of ``toolhub.cross_tenant`` (directly or through a group), as ``tenant_scope`` sees."""
    users = apps.get_model(settings.AUTH_USER_MODEL).objects
    permission = apps.get_model("auth", "Permission").objects.filter(
        content_type__app_label="toolhub", codename="cross_tenant"
    )
    crossing = set(users.filter(is_superuser=True).values_list("pk", flat=True))
    crossing |= set(users.filter(user_permissions__in=permission).values_list("pk", flat=True))
    crossing |= set(users.filter(groups__permissions__in=permission).values_list("pk", flat=True))
    return crossing


class Migration(migrations.Migration):
    dependencies = [
        ("toolhub", "0022_keyed_approval_hashes"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="grant",
            name="set_by_platform",
            field=models.BooleanField(default=True, editable=False),
        ),
        migrations.RunPython(mark_tenant_made_grants, migrations.RunPython.noop),
    ]
