"""Tool definitions in each provider's shape: OpenAI (function calling), Anthropic (tool use), Gemini, MCP.

The input schemas go out in the provider's schema profile (``toolhub.tools.profiles``): refs
inlined, decimals as strings with their digit limits, optionals simply not required. A tool sent
with ``strict`` (``strict=True`` tools for the ``openai`` profile; every tool strict mode cannot
change for ``openai-strict``) is under OpenAI's strict rules: every object closed, every property
required, optional ones nullable (a ``null`` from the model means "use the default"; toolhub maps
it back before validation). MCP gets the tool's own JSON Schema.
"""

import copy
import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.definition import Tool
from toolhub.tools.factories import output_adapter
from toolhub.tools.options import Risk
from toolhub.tools.profiles import PROFILES, profile_schema, strict_safe
from toolhub.tools.registry import registry
from toolhub.tools.schema import drop_titles
from toolhub.tools.schema_decimals import decimal_fragment, has_plain_decimals
from toolhub.tools.strict import strict_schema

__all__ = [
    "EXPORT_FORMATS",
    "SCHEMA_PROFILES",
    "buildable",
    "listable",
    "listable_names",
    "listed_schema",
    "openai_tool",
    "profile_parameters",
    "strict_schema",
    "tool_definition",
    "tool_definitions",
]

#: The schema profiles, by name (``openai``, ``openai-strict``, ``anthropic``, ``gemini``, ``compact``).
SCHEMA_PROFILES = tuple(PROFILES)

EXPORT_FORMATS = (*SCHEMA_PROFILES, "mcp")

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How much of a tool's build error the operators' log keeps (pydantic's can run to pages).
_REPORTED_CHARS = 400


def buildable(tools: Iterable[Tool], build: Callable[[Tool], T]) -> list[T]:
    """Each of ``tools`` built by ``build`` (its definition, its schema), leaving out one whose schema cannot be built.

    A tool made at runtime (dynamic, a remote server's; ``manage.py check`` E001 keeps a code tool from a deploy)
    whose schema fails must not deny a listing to everyone: the model, the client and the catalogue get the others,
    never its builder's message; operators read which tool and why in the log (``report_unbuildable``).
    """
    built: list[T] = []
    for tool in tools:
        try:
            built.append(build(tool))
        except ToolDefinitionError as exc:
            report_unbuildable(tool.name, str(exc))
    return built


def listable(tools: Iterable[Tool]) -> list[Tool]:
    """``tools`` but those whose schema cannot be built (``buildable``): what may be listed, offered or described."""
    return buildable(tools, _schema_built)


def listable_names(names: Iterable[str]) -> list[str]:
    """``names`` but those of registered tools whose schema cannot be built (``listable``), in their order.

    For what names tools to the model or a client without their definitions (a search's hits, a facade's unfold, a
    suggestion): a name every listing leaves out would send it to a tool it is never given and whose calls are
    refused, and take the place of one it could use. A name no tool has is left to the caller's own rule.
    """
    kept = list(names)
    tools = [tool for tool in map(registry.get, dict.fromkeys(kept)) if tool is not None]
    unlisted = {tool.name for tool in tools} - {tool.name for tool in listable(tools)}
    return [name for name in kept if name not in unlisted] if unlisted else kept


def listed_schema(tool: Tool) -> dict[str, Any] | None:
    """``tool.json_schema``, or ``None`` (told to operators once, as ``buildable`` does) when it cannot be built.

    For one tool's readers (a form, a rule's check, a page): the tool's own page says so in bounded words
    (``feedback.unbuildable_tool_message``), the others' pages and checks go on.
    """
    found = buildable([tool], _schema_of)
    return found[0] if found else None


def _schema_of(tool: Tool) -> dict[str, Any]:
    return tool.json_schema


def _schema_built(tool: Tool) -> Tool:
    tool.json_schema  # noqa: B018 - building it (``ToolDefinitionError`` when it cannot be) is the question
    return tool


@functools.lru_cache(maxsize=256)  # once per tool and problem in a process, not once per listing
def report_unbuildable(name: str, problem: str) -> None:
    """Tell operators a tool is left out of listings: its name, the check's id, the (bounded) reason and what to do."""
    shown = problem if len(problem) <= _REPORTED_CHARS else problem[: _REPORTED_CHARS - 3] + "..."
    logger.warning(
        "Tool %r is left out of every tool listing (toolhub.E001): its schema cannot be built: %s Hint: give its "
        "parameters types pydantic validates from JSON (manage.py check names the problem: E001, E004 for strict "
        "mode), or have a remote tool's server fix its schema and accept it again; its calls are refused meanwhile.",
        name[:100],
        shown,
    )


def tool_definition(tool: Tool, export_format: str) -> dict[str, Any]:
    """One tool as ``export_format`` describes tools: a schema profile (in its provider's shape) or ``mcp``.

    ``openai``, ``openai-strict`` and ``compact`` (llama.cpp, vLLM, Ollama speak the OpenAI API) are
    OpenAI function tools; ``anthropic`` an Anthropic tool; ``gemini`` a Gemini function declaration.
    """
    if export_format in ("openai", "openai-strict", "compact"):
        return openai_tool(tool, export_format)
    if export_format == "anthropic":
        schema, _ = profile_parameters(tool, "anthropic")
        return {"name": tool.name, "description": tool.description, "input_schema": schema}
    if export_format == "gemini":
        schema, _ = profile_parameters(tool, "gemini")
        return {"name": tool.name, "description": tool.description, "parameters": schema}
    if export_format == "mcp":
        definition: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.json_schema,
            "annotations": {
                "idempotentHint": tool.idempotent,
                "destructiveHint": tool.risk in (Risk.HIGH, Risk.CRITICAL),
            },
        }
        output = _output_schema(tool)
        if output is not None:
            definition["outputSchema"] = output
        return definition
    raise ValueError(f"Unknown export format {export_format!r}; use one of {', '.join(EXPORT_FORMATS)}.")


def tool_definitions(tools: Iterable[Tool], export_format: str) -> Any:
    """Several tools in ``export_format``: a list, or for MCP the ``tools/list`` result object (``buildable`` ones)."""
    definitions = buildable(tools, lambda tool: tool_definition(tool, export_format))
    if export_format == "mcp":
        return {"tools": definitions}
    return definitions


def openai_tool(tool: Tool, profile: str) -> dict[str, Any]:
    """``tool`` as an OpenAI function tool whose parameters are in ``profile`` (what the model adapter sends)."""
    schema, strict = profile_parameters(tool, profile)
    function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": schema}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def profile_parameters(tool: Tool, profile: str) -> tuple[dict[str, Any], bool]:
    """The tool's input schema in ``profile``, and whether it is sent with ``strict``.

    Raises ``ValueError`` for an unknown profile, ``ToolDefinitionError`` for a ``strict=True`` tool
    whose inputs strict mode cannot express (as ``Tool.strict_json_schema`` does).
    """
    schema, strict = _profile_parameters(tool, profile)
    return copy.deepcopy(schema), strict


@functools.lru_cache(maxsize=4096)
def _profile_parameters(tool: Tool, profile: str) -> tuple[dict[str, Any], bool]:
    rules = PROFILES.get(profile)
    if rules is None:
        raise ValueError(f"Unknown schema profile {profile!r}; use one of {', '.join(SCHEMA_PROFILES)}.")
    source = _input_schema(tool)
    if rules.strict == "declared":
        strict = tool.strict
    elif rules.strict == "safe":
        strict = tool.strict or strict_safe(source)
    else:
        strict = False
    if strict and tool.strict:
        tool.strict_json_schema  # noqa: B018 - refuses open mappings with the usual message
    return profile_schema(source, profile, strict=strict), strict


def _input_schema(tool: Tool) -> dict[str, Any]:
    """The tool's JSON Schema, with each ``Decimal`` as a string pattern keeping its digit limits.

    Pydantic writes a decimal as ``anyOf: [number, string]`` and drops ``max_digits`` and
    ``decimal_places``; they are read again from the input model, only for tools that have decimals.
    """
    schema = tool.json_schema
    if not tool.inputs.has_model or not has_plain_decimals(schema):
        return schema
    try:
        regenerated = tool.input_model.model_json_schema(schema_generator=_DecimalsAsStrings)
    except Exception:  # noqa: BLE001 - the profile then writes decimals without their limits
        return schema
    cleaned: dict[str, Any] = drop_titles(regenerated)
    cleaned.setdefault("properties", {})
    return cleaned


class _DecimalsAsStrings(GenerateJsonSchema):
    def decimal_schema(self, schema: core_schema.DecimalSchema) -> JsonSchemaValue:
        return decimal_fragment(
            max_digits=schema.get("max_digits"),
            decimal_places=schema.get("decimal_places"),
            bounds={
                "minimum": schema.get("ge"),
                "exclusiveMinimum": schema.get("gt"),
                "maximum": schema.get("le"),
                "exclusiveMaximum": schema.get("lt"),
                "multipleOf": schema.get("multiple_of"),
            },
        )


def _output_schema(tool: Tool) -> dict[str, Any] | None:
    if tool.output_type is None or tool.output_type is str:
        return None
    try:
        schema = output_adapter(tool.output_type).json_schema()
    except Exception:  # noqa: BLE001 - an output without a schema is simply not advertised
        return None
    return schema if schema.get("type") == "object" else None
