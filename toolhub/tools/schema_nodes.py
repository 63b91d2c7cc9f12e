"""Reading a JSON Schema: walking its nodes, inlining local ``$ref``s, whether a node accepts null, limits in words.

Plain JSON Schema, no provider's rules: the schema profiles (``toolhub.tools.profiles``) and their decimals
(``toolhub.tools.schema_decimals``) both build on it. Every function is pure.
"""

import copy
from collections.abc import Iterator
from typing import Any

__all__ = ["NULL_SCHEMA", "accepts_null", "constraint_words", "inline_refs", "nodes_of", "walk_nodes"]

#: The schema of ``null``: a branch of ``anyOf`` that makes a value optional.
NULL_SCHEMA = {"type": "null"}


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` replaced by its definition and no ``$defs`` left.

    A recursive type cannot be inlined: its inner occurrence becomes a plain object.
    """
    definitions = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            name = ref.rsplit("/", 1)[1]
            siblings = {k: resolve(v, seen) for k, v in node.items() if k != "$ref"}
            if name in seen or name not in definitions:
                return {"type": "object", **siblings}
            return {**resolve(definitions[name], (*seen, name)), **siblings}
        return {k: resolve(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    resolved: dict[str, Any] = resolve(copy.deepcopy(schema), ())
    return resolved


def accepts_null(node: Any) -> bool:
    """Whether ``null`` is a valid value of ``node`` (a schema without a type accepts it)."""
    if not isinstance(node, dict) or not node:
        return True
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind) or node.get("nullable") is True:
        return "enum" not in node or None in node["enum"]
    if "anyOf" in node:
        return any(accepts_null(branch) for branch in node["anyOf"])
    return kind is None and "enum" not in node and "const" not in node and "$ref" not in node


def constraint_words(constraints: dict[str, Any]) -> list[str]:
    """``constraints`` (JSON Schema keywords and their values) in words, for a description."""
    words = {
        "minimum": "at least {}",
        "exclusiveMinimum": "more than {}",
        "maximum": "at most {}",
        "exclusiveMaximum": "less than {}",
        "multipleOf": "a multiple of {}",
        "minLength": "at least {} characters",
        "maxLength": "at most {} characters",
        "minItems": "at least {} items",
        "maxItems": "at most {} items",
        "pattern": "matching {}",
        "format": "format: {}",
    }
    out = [template.format(constraints[key]) for key, template in words.items() if constraints.get(key) is not None]
    if constraints.get("uniqueItems"):
        out.append("no duplicates")
    return out


def nodes_of(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema node in ``node``, itself first."""
    for _, found in walk_nodes(node, "$"):
        yield found


def walk_nodes(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node in ``node`` with its path (``$.address.items``), parents before their children."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from walk_nodes(item, f"{path}[{index}]")
        return
    if not isinstance(node, dict):
        return
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk_nodes(sub, f"{path}.{name}")
    for key in ("items", "anyOf", "prefixItems", "additionalProperties", "allOf", "oneOf"):
        if isinstance(node.get(key), dict | list):
            yield from walk_nodes(node[key], f"{path}.{key}")
    for name, sub in {**node.get("$defs", {}), **node.get("definitions", {})}.items():
        yield from walk_nodes(sub, f"{path}.$defs.{name}")
