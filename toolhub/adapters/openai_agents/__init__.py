"""OpenAI Agents SDK adapter: toolhub tools as the SDK's ``FunctionTool``s, its interruptions as approvals.

Install the ``openai-agents`` extra. The SDK is imported only when one of the SDK-side names below is
used, so the Django app (which stores paused runs) loads without it.
"""

from typing import Any

_SDK_NAMES = frozenset(
    {"GovernedRunOutcome", "RUN_KEY", "governed_tools", "run_context", "run_governed", "resume_governed"}
)
_STORE_NAMES = frozenset({"AdapterError", "RunNotDecidedError", "paused_runs_ready"})

__all__ = sorted(_SDK_NAMES | _STORE_NAMES)


def __getattr__(name: str) -> Any:
    if name in _SDK_NAMES:
        from toolhub.adapters.openai_agents import sdk

        return getattr(sdk, name)
    if name in _STORE_NAMES:
        from toolhub.adapters.openai_agents import store

        return getattr(store, name)
    raise AttributeError(name)
