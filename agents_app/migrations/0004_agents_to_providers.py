"""Turn each agent's own endpoint settings into a named model provider.

Agents with the same (base URL, model, key variable) share one provider; existing agents stay
global, as they were visible to everyone before. Who may manage agents is the ``developers`` role,
set up by ``manage.py toolhub_roles`` (run it after this migration).
"""

from django.db import migrations
from django.utils.text import slugify



def agents_to_providers(apps, schema_editor):  # type: ignore[no-untyped-def]
    ModelProvider = apps.get_model("agents_app", "ModelProvider")
    Agent = apps.get_model("agents_app", "Agent")
    scripted, _ = ModelProvider.objects.get_or_create(name="scripted", defaults={"kind": "scripted"})
    made: dict = {}
    for agent in Agent.objects.order_by("pk"):
        if agent.provider != "openai":
            agent.model_provider = scripted
        else:
            key = (agent.base_url, agent.model_name, agent.api_key_env)
            if key not in made:
                made[key] = ModelProvider.objects.create(
                    name=_free_name(ModelProvider, slugify(f"{agent.name}-model")[:90] or "provider"),
                    kind="openai",
                    base_url=agent.base_url,
                    model_name=agent.model_name,
                    credential_env=agent.api_key_env,
                )
            agent.model_provider = made[key]
        agent.save(update_fields=["model_provider"])


def providers_to_agents(apps, schema_editor):  # type: ignore[no-untyped-def]
    Agent = apps.get_model("agents_app", "Agent")
    for agent in Agent.objects.select_related("model_provider"):
        provider = agent.model_provider
        if provider is None:
            continue
        agent.provider = provider.kind
        agent.base_url = provider.base_url
        agent.model_name = provider.model_name
        agent.api_key_env = provider.credential_env
        agent.save(update_fields=["provider", "base_url", "model_name", "api_key_env"])


def _free_name(model, name: str) -> str:  # type: ignore[no-untyped-def]
    candidate, number = name, 1
    while model.objects.filter(name=candidate).exists():
        number += 1
        candidate = f"{name}-{number}"
    return candidate


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0003_model_providers"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.RunPython(agents_to_providers, providers_to_agents),
    ]
