"""Agents and their runs: the LLM loop over governed tools."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents_app"
    label = "agents_app"
    verbose_name = "Agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents_app import (
            checks,  # noqa: F401 - registers the system checks
            receivers,  # noqa: F401 - resumes runs when their calls settle
            subagents,  # noqa: F401 - starts a subagent's child run once its call is suspended
        )
        from agents_app.agentic import agentic_model
        from agents_app.selectors import (
            agent_tools,
            run_call_agent_tools,
            run_call_agent_tools_sql,
            run_call_delegated_by,
            run_delegated_by,
        )
        from toolhub.agentic.models import register_model_resolver
        from toolhub.authorization import AgentToolsSql, register_agent_tools_resolver

        register_agent_tools_resolver(
            agent_tools,
            sql=AgentToolsSql(
                expression=run_call_agent_tools_sql, tools=run_call_agent_tools, delegated_by=run_call_delegated_by
            ),
            delegators=run_delegated_by,
        )
        register_model_resolver(agentic_model)
