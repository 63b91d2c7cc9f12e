"""The app that stores the OpenAI Agents SDK runs paused for toolhub approvals."""

from django.apps import AppConfig


class OpenAIAgentsAdapterConfig(AppConfig):
    name = "toolhub.adapters.openai_agents"
    label = "openai_agents_adapter"
    verbose_name = "OpenAI Agents SDK runs"
    default_auto_field = "django.db.models.BigAutoField"
