"""The keys of accounts already inactive end too (``toolhub.api.token_binding.DEACTIVATED``), not only those to come.

Migration 0055's trigger sees deactivations written after it: an account deactivated by ``QuerySet.update`` or SQL
before it (or while migrated back to 0054) kept its keys bound to its password, and a reactivation by ``update`` gave
them back. Each forward run (after a migration back too) binds the keys of every account inactive now to no password,
as the trigger would have; a reactivated account gets a new one from the admin's Tokens. Backward, nothing to undo.
"""

from django.db import migrations


def unbind_inactive(apps, schema_editor):  # type: ignore[no-untyped-def]
    from toolhub.api.token_binding import DEACTIVATED

    Binding = apps.get_model("toolhub", "ApiTokenBinding")
    user = Binding._meta.get_field("token").related_model._meta.get_field("user").related_model
    if not any(field.name == "is_active" for field in user._meta.concrete_fields):
        return  # a custom user model without the flag: nothing deactivates it
    inactive = Binding.objects.using(schema_editor.connection.alias).filter(token__user__is_active=False)
    inactive.exclude(password_fingerprint=DEACTIVATED).update(password_fingerprint=DEACTIVATED)


class Migration(migrations.Migration):

    dependencies = [
        ("toolhub", "0056_approved_under_decided"),
    ]

    operations = [
        migrations.RunPython(unbind_inactive, migrations.RunPython.noop),
    ]
