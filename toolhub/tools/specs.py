"""The parameters of a tool, as values: what the model fills in and what toolhub injects."""

import inspect
from dataclasses import dataclass
from typing import Any

__all__ = ["Param", "ParameterSpec", "InjectedParameter"]


@dataclass(frozen=True)
class Param:
    """Describes a tool parameter for the model: ``Annotated[str, Param("the customer's id")]``.

    A tool's own parameters are read by toolhub; a field of a pydantic model (an ``input_model``, a
    subagent's input, a nested model) is read by pydantic, which asks this hook, so the model sees the
    description there too.
    """

    description: str

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return {**handler(core_schema), "description": self.description}


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter the model fills in: its name, type, default and description."""

    name: str
    annotation: Any
    default: Any
    description: str | None

    @property
    def required(self) -> bool:
        return self.default is ...


@dataclass(frozen=True)
class InjectedParameter:
    """A parameter toolhub fills in when the tool runs; the model never sees it.

    ``kind`` is ``context`` (the ``ToolContext``), ``progress`` (a ``Progress`` emitter),
    ``context_object`` (a registered context type, built from the context) or ``preset`` (a value
    or secret declared in ``presets=``).
    """

    name: str
    kind: str
    annotation: Any
    default: Any = inspect.Parameter.empty
