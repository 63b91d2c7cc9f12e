"""A tenant's calls page reads the page (review u): ``toolcall_tenant_created`` ends with ``id``, the list's tie-break.

``(tenant, created_at)`` left ``-created_at, -id`` to a sort; under statistics older than a tenant's calls the
planner sorted every call of the tenant for each page. Same name, same prefix: it serves what the old one served.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0057_api_token_unbind_inactive")]

    operations = [
        migrations.RemoveIndex(model_name="toolcall", name="toolcall_tenant_created"),
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(fields=["tenant", "created_at", "id"], name="toolcall_tenant_created"),
        ),
    ]
