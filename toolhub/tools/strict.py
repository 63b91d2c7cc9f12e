"""OpenAI's strict rules applied to a schema: every object closed, every property required, optionals nullable."""

import copy
from typing import Any

from toolhub.exceptions import ToolDefinitionError

__all__ = ["strict_schema"]


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
