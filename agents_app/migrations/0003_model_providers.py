"""Model providers (admin-owned endpoints and credentials), agent tenants and the step token: new columns."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0002_immediate_return"),
        ("toolhub", "0006_cross_tenant_permission"),
    ]

    operations = [
        migrations.CreateModel(
            name="ModelProvider",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "name",
                    models.SlugField(help_text="What agents reference, e.g. openai-prod.", max_length=100, unique=True),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[("openai", "OpenAI-compatible endpoint"), ("scripted", "Scripted (deterministic)")],
                        default="openai",
                        max_length=16,
                    ),
                ),
                (
                    "base_url",
                    models.URLField(
                        blank=True, help_text="The OpenAI-compatible endpoint, e.g. https://api.openai.com/v1."
                    ),
                ),
                ("model_name", models.CharField(blank=True, max_length=200)),
                (
                    "credential_env",
                    models.CharField(
                        blank=True,
                        help_text="Name of the environment variable holding the API key (never the key); empty: no key.",
                        max_length=100,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z_][A-Za-z0-9_]*$", "Give the NAME of an environment variable."
                            )
                        ],
                    ),
                ),
                (
                    "request_timeout_seconds",
                    models.FloatField(
                        default=30.0,
                        help_text="Longest wait for connecting or for the next bytes of an answer.",
                        validators=[
                            django.core.validators.MinValueValidator(1.0),
                            django.core.validators.MaxValueValidator(900),
                        ],
                    ),
                ),
                (
                    "deadline_seconds",
                    models.FloatField(
                        default=120.0,
                        help_text="Longest time one model call may take in all, however the endpoint drips its answer.",
                        validators=[
                            django.core.validators.MinValueValidator(1.0),
                            django.core.validators.MaxValueValidator(900),
                        ],
                    ),
                ),
                ("enabled", models.BooleanField(default=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "tenant",
                    models.ForeignKey(
                        blank=True,
                        help_text="Only this tenant's agents may use it; empty: every tenant's agents and global agents.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="toolhub.tenant",
                    ),
                ),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.AddField(
            model_name="agent",
            name="tenant",
            field=models.ForeignKey(
                blank=True,
                help_text="Empty: global.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="toolhub.tenant",
            ),
        ),
        migrations.AddField(
            model_name="agent",
            name="model_provider",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="agents",
                to="agents_app.modelprovider",
            ),
        ),
        migrations.AddField(
            model_name="agentrun",
            name="step_token",
            field=models.UUIDField(
                blank=True,
                help_text="Names the model call in flight; an answer carrying another token is dropped.",
                null=True,
            ),
        ),
    ]
