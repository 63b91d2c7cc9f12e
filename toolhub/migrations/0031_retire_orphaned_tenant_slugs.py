"""Retire the slugs that rows name but no tenant holds: tenants deleted, or slugs renamed, before 0029.

From 0029 on, deleting a tenant retires its slug. A tenant deleted (or a slug renamed) under an earlier release
left its calls, runs, approval requests, sagas and audit events naming a slug nothing retired, so the first new
tenant given it inherited them. Every tenant-scoped row names its tenant in a non-relational field ``tenant``;
the slugs found there that no tenant holds are retired as a deletion retires them. It only reads and inserts,
so it is safe on a populated database the release still serves; backwards there is nothing to undo (0029's
reverse drops the table).
"""

from django.db import migrations


def _named_slugs(apps, alias: str) -> set[str]:  # type: ignore[no-untyped-def]
    """Every non-empty slug a row names in a model's ``tenant`` field (of every app in the migration state)."""
    slugs: set[str] = set()
    for model in apps.get_models():
        if any(field.name == "tenant" and not field.is_relation for field in model._meta.concrete_fields):
            rows = model._base_manager.using(alias).exclude(tenant="")
            slugs.update(rows.order_by().values_list("tenant", flat=True).distinct())
    return slugs


def retire_orphaned_slugs(apps, schema_editor):  # type: ignore[no-untyped-def]
    from toolhub.audit_hash import tenant_chain_base

    alias = schema_editor.connection.alias
    tenant = apps.get_model("toolhub", "Tenant")
    retired = apps.get_model("toolhub", "RetiredTenantSlug")
    held = set(tenant.objects.using(alias).values_list("slug", flat=True))
    held |= set(retired.objects.using(alias).values_list("slug", flat=True))
    longest = retired._meta.get_field("slug").max_length  # a tenant's slug never was longer
    orphaned = sorted(slug for slug in _named_slugs(apps, alias) - held if len(slug) <= longest)
    retired.objects.using(alias).bulk_create(
        [retired(slug=slug, audit_chain_base=tenant_chain_base(slug)) for slug in orphaned]
    )


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0030_tool_group_name_fixed")]

    operations = [migrations.RunPython(retire_orphaned_slugs, migrations.RunPython.noop)]
