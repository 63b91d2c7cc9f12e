"""OpenAI Agents SDK adapter: toolhub tools as the SDK's ``FunctionTool``s, its interruptions as approvals.

Install the ``openai-agents`` extra. The SDK is imported only when one of the names below is used, so
the Django app (which stores paused runs) loads without it.
"""

from typing import Any

__all__ = [
    "GovernedRunOutcome",
    "RunNotDecidedError",
    "governed_tools",
    "run_context",
    "run_governed",
    "resume_governed",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from toolhub.adapters.openai_agents import sdk

        return getattr(sdk, name)
    raise AttributeError(name)
