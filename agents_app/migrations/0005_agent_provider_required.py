"""Agents name a provider; their own endpoint columns go; names are unique per tenant and among globals."""

import django.db.models.deletion
from django.db import migrations, models

import agents_app.models


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0004_agents_to_providers"),
    ]

    operations = [
        migrations.RemoveField(model_name="agent", name="provider"),
        migrations.RemoveField(model_name="agent", name="base_url"),
        migrations.RemoveField(model_name="agent", name="model_name"),
        migrations.RemoveField(model_name="agent", name="api_key_env"),
        migrations.RenameField(model_name="agent", old_name="model_provider", new_name="provider"),
        migrations.AlterField(
            model_name="agent",
            name="provider",
            field=models.ForeignKey(
                default=agents_app.models.default_provider_id,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="agents",
                to="agents_app.modelprovider",
            ),
        ),
        migrations.AlterField(
            model_name="agent",
            name="name",
            field=models.SlugField(max_length=100),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.UniqueConstraint(
                condition=models.Q(tenant__isnull=False), fields=("tenant", "name"), name="unique_agent_name_in_tenant"
            ),
        ),
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.UniqueConstraint(
                condition=models.Q(tenant__isnull=True), fields=("name",), name="unique_global_agent_name"
            ),
        ),
    ]
