"""Agentic tools and tool chaining (Embabel), governed like any other tool.

``SimpleAgenticTool``: a tool whose call lets a model orchestrate sub-tools, each an audited inner call.
``PlaybookTool``: tools unlocked by prerequisites; ``StateMachineTool``: tools per enum state, with
transitions. ``ChainedType``: the ``@tool`` methods of a domain object a tool returned become tools of
the run. Their run state lives in the run's stored disclosure state (``DisclosureState.agentic`` and
``.chained``), so a resumed run continues where it was.
"""

from toolhub.agentic.base import AgenticFacts
from toolhub.agentic.chaining import ChainedType
from toolhub.agentic.inner import inner_calls_of
from toolhub.agentic.playbook import PlaybookTool, Unlock
from toolhub.agentic.simple import SimpleAgenticTool
from toolhub.agentic.state_machine import StateMachineTool, Transition

__all__ = [
    "AgenticFacts",
    "ChainedType",
    "PlaybookTool",
    "SimpleAgenticTool",
    "StateMachineTool",
    "Transition",
    "Unlock",
    "inner_calls_of",
]
