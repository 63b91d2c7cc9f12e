"""``toolhub.cross_tenant`` named in 50 characters at most, so ``migrate auth 0001`` works on PostgreSQL.

``auth 0002`` widened ``Permission.name`` from 50 to 255 characters; migrating auth back narrows it again and
failed on PostgreSQL (value too long) on the 54 characters this permission was named in. Django's
``create_permissions`` never renames a permission that exists, so the stored row is renamed here. Backwards
the shorter name stays: going further back (``migrate auth 0001``) unapplies this first and needs it short.
"""

from django.apps.registry import Apps
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

NAME = "Can act on every tenant's data (platform team)"


def rename(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Permission = apps.get_model("auth", "Permission")
    Permission.objects.using(schema_editor.connection.alias).filter(
        content_type__app_label="toolhub", codename="cross_tenant"
    ).update(name=NAME)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("toolhub", "0038_toolcall_open_of_turn"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="tenant",
            options={"permissions": [("cross_tenant", NAME)]},
        ),
        migrations.RunPython(rename, migrations.RunPython.noop, elidable=True),
    ]
