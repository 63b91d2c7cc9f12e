"""A deactivation by ``QuerySet.update`` or SQL ends the account's API tokens (``toolhub.api.token_binding``).

The trigger is installed here and again after every ``migrate`` (``toolhub.apps._install_binding_triggers``: a
rebuild of the user table on SQLite drops it). Backward, it goes before its bindings' table does (migration 0052's
reverse): left behind, every deactivation would fail on the missing table. On SQLite it waits for the end of the run
(``post_migrate``): a later migration rebuilding a table it names would fail on it (``binding_triggers_migrating``).
"""

from django.db import migrations


def install_binding_triggers(apps, schema_editor):  # type: ignore[no-untyped-def]
    from toolhub.api.token_binding import binding_triggers_install

    if schema_editor.connection.vendor != "sqlite":
        binding_triggers_install(schema_editor.connection)


def drop_binding_triggers(apps, schema_editor):  # type: ignore[no-untyped-def]
    from toolhub.api.token_binding import binding_triggers_drop

    binding_triggers_drop(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ("toolhub", "0054_toolcall_compensates"),
    ]

    operations = [
        migrations.RunPython(install_binding_triggers, drop_binding_triggers),
    ]
