"""A tenant's audit browser reads the page (review z): ``audit_tenant_created`` ends with ``id``, the list's tie-break.

``(tenant, created_at)`` left ``-created_at, -id`` to a sort; under statistics older than a tenant's events the
planner sorted every event of the tenant for each page. Same name, same prefix: it serves what the old one served.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0058_toolcall_tenant_created_id")]

    operations = [
        migrations.RemoveIndex(model_name="auditevent", name="audit_tenant_created"),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(fields=["tenant", "created_at", "id"], name="audit_tenant_created"),
        ),
    ]
