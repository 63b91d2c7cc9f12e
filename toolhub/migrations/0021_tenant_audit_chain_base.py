"""Each tenant's first audit chain, stored unique, so that no two tenants' events can share a chain.

Existing tenants get theirs from their slug; should two older slugs collide (about 1 in 10^12 for a
pair), the second keeps NULL and ``verify_audit --tenant`` reports the shared chains.
"""

from django.db import migrations, models


def fill_chain_bases(apps, schema_editor):  # type: ignore[no-untyped-def]
    from toolhub.audit_hash import tenant_chain_base

    Tenant = apps.get_model("toolhub", "Tenant")
    taken = set()
    for tenant in Tenant.objects.order_by("pk"):
        base = tenant_chain_base(tenant.slug)
        if base not in taken:
            taken.add(base)
            Tenant.objects.filter(pk=tenant.pk).update(audit_chain_base=base)


class Migration(migrations.Migration):

    dependencies = [
        ("toolhub", "0020_audit_chains_per_tenant"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="audit_chain_base",
            field=models.PositiveBigIntegerField(editable=False, null=True, unique=True),
        ),
        migrations.RunPython(fill_chain_bases, migrations.RunPython.noop),
    ]
