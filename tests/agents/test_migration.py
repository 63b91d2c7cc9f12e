"""The data migration: agents' own endpoint settings become named providers, so existing databases keep working."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("agents_app", "0002_immediate_return")]
AFTER = [("agents_app", "0005_agent_provider_required")]


def _latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes("agents_app")


def _migrate(targets: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_existing_agents_are_moved_onto_providers() -> None:
    # given a database from before providers, with agents that carry their own endpoint settings
    old = _migrate(BEFORE)
    try:
        agent = old.get_model("agents_app", "Agent")
        agent.objects.create(name="scripted-one", provider="scripted", script=[{"content": "hi"}])
        endpoint = {"base_url": "http://127.0.0.1:11434/v1", "model_name": "llama3.1", "api_key_env": "OLLAMA_KEY"}
        agent.objects.create(name="local-a", provider="openai", **endpoint)
        agent.objects.create(name="local-b", provider="openai", **endpoint)
        agent.objects.create(name="hosted", provider="openai", base_url="https://api.example.com/v1", model_name="m")

        # when the migrations run
        new = _migrate(AFTER)
    finally:
        _migrate(AFTER)
        latest = _migrate(_latest())  # later tests need today's schema

    # then each distinct endpoint became one provider, and every agent names one (global, as they were visible to all)
    agents = {a.name: a for a in new.get_model("agents_app", "Agent").objects.select_related("provider")}
    assert agents["scripted-one"].provider.name == "scripted"
    assert agents["scripted-one"].provider.kind == "scripted"
    assert agents["local-a"].provider_id == agents["local-b"].provider_id
    local = agents["local-a"].provider
    assert (local.name, local.kind, local.base_url, local.model_name, local.credential_env, local.enabled) == (
        "local-a-model",
        "openai",
        "http://127.0.0.1:11434/v1",
        "llama3.1",
        "OLLAMA_KEY",
        True,
    )
    assert (agents["hosted"].provider.name, agents["hosted"].provider.credential_env) == ("hosted-model", "")
    assert all(a.tenant_id is None for a in agents.values())
    # and later migrations give them today's defaults: the kind's schema profile, notes in tool results
    provider = latest.get_model("agents_app", "ModelProvider").objects.get(name="local-a-model")
    assert (provider.schema_profile, provider.note_placement) == ("", "tool_result")
    agent = latest.get_model("agents_app", "Agent").objects.get(name="hosted")
    assert (agent.tool_choice, agent.temperature, agent.max_tokens) == ("", None, None)
