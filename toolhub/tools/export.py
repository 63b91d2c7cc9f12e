"""Tool definitions in each provider's shape: OpenAI (function calling), Anthropic (tool use), MCP.

A ``strict=True`` tool is exported to OpenAI under the strict rules: every object closed
(``additionalProperties: false``), every property required, optional ones nullable (a ``null``
from the model means "use the default"; toolhub maps it back before validation).
"""

import copy
from collections.abc import Iterable
from typing import Any

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.definition import Risk, Tool

__all__ = ["EXPORT_FORMATS", "strict_schema", "tool_definition", "tool_definitions"]

EXPORT_FORMATS = ("openai", "anthropic", "mcp")


def tool_definition(tool: Tool, export_format: str) -> dict[str, Any]:
    """One tool as ``export_format`` (``openai``, ``anthropic`` or ``mcp``) describes tools."""
    if export_format == "openai":
        function: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.strict_json_schema if tool.strict else tool.json_schema,
        }
        if tool.strict:
            function["strict"] = True
        return {"type": "function", "function": function}
    if export_format == "anthropic":
        return {"name": tool.name, "description": tool.description, "input_schema": tool.json_schema}
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
    """Several tools in ``export_format``: a list, or for MCP the ``tools/list`` result object."""
    definitions = [tool_definition(tool, export_format) for tool in tools]
    if export_format == "mcp":
        return {"tools": definitions}
    return definitions


def strict_schema(tool_name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` under OpenAI's strict rules; refuse open mappings, which strict mode cannot express."""
    strict = copy.deepcopy(schema)
    _close(strict, tool_name, "(arguments)")
    return strict


def _close(node: Any, tool_name: str, path: str) -> None:
    if isinstance(node, list):
        for item in node:
            _close(item, tool_name, path)
        return
    if not isinstance(node, dict):
        return
    node.pop("default", None)
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) or extra is True or ("properties" not in node and extra is not False):
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: strict mode needs objects with fixed properties, but {path} is an open mapping "
                "(a dict); use a pydantic model or a TypedDict there, or strict=False."
            )
        properties = node.setdefault("properties", {})
        required = set(node.get("required", []))
        for name, sub in list(properties.items()):
            _close(sub, tool_name, f"{path}.{name}")
            if name not in required:
                properties[name] = _nullable(sub)
        node["required"] = list(properties)
        node["additionalProperties"] = False
    for key in ("items", "prefixItems", "anyOf", "oneOf", "allOf"):
        if key in node:
            _close(node[key], tool_name, f"{path}[]")
    for name, definition in node.get("$defs", {}).items():
        _close(definition, tool_name, name)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in schema:
        if {"type": "null"} not in schema["anyOf"]:
            schema["anyOf"].append({"type": "null"})
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and "$ref" not in schema:
        schema["type"] = [kind, "null"]
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        return schema
    if isinstance(kind, list):
        if "null" not in kind:
            schema["type"] = [*kind, "null"]
        return schema
    description = schema.pop("description", None)
    wrapped: dict[str, Any] = {"anyOf": [schema, {"type": "null"}]}
    if description:
        wrapped["description"] = description
    return wrapped


def _output_schema(tool: Tool) -> dict[str, Any] | None:
    if tool.output_type is None or tool.output_type is str:
        return None
    from toolhub.tools.definition import _output_adapter

    try:
        schema = _output_adapter(tool.output_type).json_schema()
    except Exception:  # noqa: BLE001 - an output without a schema is simply not advertised
        return None
    return schema if schema.get("type") == "object" else None
