"""Tool input schemas in the dialect each model server accepts (a "schema profile").

Pydantic's JSON Schema is correct but awkward for model servers: enums and nested models hide
behind ``$ref``/``$defs``, ``Optional[X]`` is ``anyOf: [X, null]``, ``Decimal`` is
``anyOf: [number, string]`` without its digit limits. Servers that compile schemas into grammars
(llama.cpp, vLLM guided decoding, Ollama) handle ``$ref`` and ``anyOf`` badly, Gemini accepts an
OpenAPI subset, and OpenAI's strict mode accepts a subset with every property required.

Every function here is pure: it takes a JSON Schema and returns a new one. The profile only
changes what the model is shown; the tool still validates arguments against its own schema, so a
profile may be narrower than the tool (a decimal only as a string) but never wider.

Profiles:

- ``openai``: OpenAI-compatible servers; ``strict`` is sent for tools declared ``strict=True``.
- ``openai-strict``: OpenAI with Structured Outputs: also every other tool for which strict mode
  cannot change what the call means (closed objects, and ``null`` a valid value of every optional).
- ``anthropic``: Anthropic tool use (full JSON Schema, refs inlined).
- ``gemini``: Gemini function declarations (OpenAPI subset: one type per schema, ``nullable``).
- ``compact``: llama.cpp, vLLM, Ollama grammar compilers: no ``anyOf``/``$ref``, small keyword set.
"""

from dataclasses import dataclass
from typing import Any

from toolhub.tools.schema_decimals import decimal_fragment, is_decimal_union
from toolhub.tools.schema_nodes import NULL_SCHEMA, accepts_null, constraint_words, inline_refs, nodes_of, walk_nodes

__all__ = [
    "PROFILES",
    "SchemaProfile",
    "profile_problems",
    "profile_schema",
    "strict_safe",
]

#: Keywords that constrain a value; when a profile drops one, its meaning goes into the description.
_CONSTRAINTS = (
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
)

_STRUCTURE = frozenset({"type", "properties", "required", "items", "enum", "description"})


@dataclass(frozen=True)
class SchemaProfile:
    """What one family of model servers accepts in a tool's input schema."""

    name: str
    #: Keywords kept (others are dropped, constraints noted in the description); ``None``: all.
    keywords: frozenset[str] | None
    #: Whether ``anyOf`` may remain where no single type says the same.
    any_of: bool
    #: How "or null" is written: ``"type-list"`` (``type: [X, "null"]``) or ``"nullable"`` (OpenAPI).
    null_style: str
    #: Whether ``strict`` is sent at all, and for which tools: ``"declared"`` or ``"safe"``.
    strict: str | None
    #: String formats the server understands (others go into the description); ``None``: all.
    formats: frozenset[str] | None = None
    #: Whether a schema may be a list of types.
    type_lists: bool = True


_OPENAI_STRICT_KEYWORDS = frozenset(
    {
        *_STRUCTURE,
        "additionalProperties",
        "anyOf",
        "const",
        "title",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)

PROFILES: dict[str, SchemaProfile] = {
    "openai": SchemaProfile("openai", None, any_of=True, null_style="type-list", strict="declared"),
    "openai-strict": SchemaProfile("openai-strict", None, any_of=True, null_style="type-list", strict="safe"),
    "anthropic": SchemaProfile("anthropic", None, any_of=True, null_style="type-list", strict=None),
    "gemini": SchemaProfile(
        "gemini",
        frozenset(
            {
                *_STRUCTURE,
                "nullable",
                "format",
                "minimum",
                "maximum",
                "minItems",
                "maxItems",
                "minLength",
                "maxLength",
                "pattern",
                "anyOf",
                "default",
                "title",
            }
        ),
        any_of=True,
        null_style="nullable",
        strict=None,
        formats=frozenset({"date-time", "enum", "int32", "int64", "float", "double"}),
        type_lists=False,
    ),
    "compact": SchemaProfile(
        "compact",
        frozenset(
            {
                *_STRUCTURE,
                "additionalProperties",
                "const",
                "prefixItems",
                "pattern",
                "format",
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
                "minLength",
                "maxLength",
                "minItems",
                "maxItems",
            }
        ),
        any_of=False,
        null_style="type-list",
        strict=None,
        formats=frozenset({"date", "time", "date-time", "uuid"}),
    ),
}


def profile_schema(schema: dict[str, Any], profile: str, *, strict: bool = False) -> dict[str, Any]:
    """``schema`` rewritten for ``profile``; ``strict``: under OpenAI's strict rules (closed, all required).

    ``schema`` is not changed. Raises ``ValueError`` for an unknown profile.
    """
    rules = _profile(profile)
    inlined = inline_refs(schema)
    shaped: dict[str, Any] = _shape(inlined, rules, strict=strict)
    if strict:
        _close(shaped)
        shaped = _keep_keywords(shaped, _OPENAI_STRICT_KEYWORDS)
    return shaped


def strict_safe(schema: dict[str, Any]) -> bool:
    """Whether OpenAI's strict rules leave the meaning of every call unchanged.

    Strict mode makes every property required and optional ones nullable: the model sends ``null``
    for "unset". That is only harmless where ``null`` is already a valid value of every optional
    property, and where no object is an open mapping.
    """
    for node in nodes_of(inline_refs(schema)):
        if node.get("type") == "object" or "properties" in node:
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) or extra is True or ("properties" not in node and extra is not False):
                return False
            required = set(node.get("required", ()))
            for name, sub in node.get("properties", {}).items():
                if name not in required and not accepts_null(sub):
                    return False
    return True


def profile_problems(schema: dict[str, Any], profile: str, *, strict: bool = False) -> list[str]:
    """Every way ``schema`` breaks ``profile``'s rules (an empty list: the server accepts it)."""
    rules = _profile(profile)
    problems = []
    if schema.get("type") != "object":
        problems.append("the root is not an object")
    for path, node in walk_nodes(schema, "$"):
        for key in ("$ref", "$defs", "definitions", "allOf", "oneOf"):
            if key in node:
                problems.append(f"{path} uses {key}")
        if not rules.any_of and "anyOf" in node:
            problems.append(f"{path} uses anyOf")
        if rules.keywords is not None:
            for key in sorted(set(node) - rules.keywords):
                problems.append(f"{path} uses {key}, which {profile} does not accept")
        kind = node.get("type")
        if isinstance(kind, list) and not rules.type_lists:
            problems.append(f"{path} has a list of types")
        if rules.formats is not None and "format" in node and node["format"] not in rules.formats:
            problems.append(f"{path} has format {node['format']!r}, which {profile} does not know")
        if "anyOf" in node and is_decimal_union(node):
            problems.append(f"{path} is a decimal as anyOf (number or string) without its limits")
        if strict:
            problems.extend(_strict_problems(path, node))
    return problems


def _strict_problems(path: str, node: dict[str, Any]) -> list[str]:
    problems = [
        f"{path} uses {key}, which OpenAI's strict mode does not accept"
        for key in sorted(set(node) - _OPENAI_STRICT_KEYWORDS)
    ]
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            problems.append(f"{path} is an object without additionalProperties: false")
        missing = set(node.get("properties", {})) - set(node.get("required", ()))
        if missing:
            problems.append(f"{path} does not require {sorted(missing)}")
    return problems


def _profile(profile: str) -> SchemaProfile:
    try:
        return PROFILES[profile]
    except KeyError:
        raise ValueError(f"Unknown schema profile {profile!r}; use one of {', '.join(PROFILES)}.") from None


def _shape(node: Any, rules: SchemaProfile, *, strict: bool) -> Any:
    if isinstance(node, list):
        return [_shape(item, rules, strict=strict) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if len(node.get("allOf", ())) == 1:  # pydantic's old way of giving a $ref siblings
        node = {**node.pop("allOf")[0], **node}
    if "anyOf" in node and is_decimal_union(node):
        branches = node.pop("anyOf")
        number = next(b for b in branches if b.get("type") == "number")
        fragment = decimal_fragment(bounds={k: number.get(k) for k in _CONSTRAINTS})
        if NULL_SCHEMA in branches:
            node["anyOf"] = [fragment, NULL_SCHEMA]
        else:
            node = {**fragment, **node, "description": _joined(node.get("description"), fragment["description"])}
    if "properties" in node:
        required = set(node.get("required", ()))
        properties = {}
        for name, sub in node["properties"].items():
            if name not in required and not strict and isinstance(sub, dict) and sub.get("default", 0) is None:
                sub = _without_null(sub)  # Optional with default None: just leave it out
            properties[name] = _shape(sub, rules, strict=strict)
        node["properties"] = properties
    for key in ("items", "additionalProperties", "prefixItems"):
        if isinstance(node.get(key), dict | list):
            node[key] = _shape(node[key], rules, strict=strict)
    if "anyOf" in node:
        node = _union(node, [_shape(b, rules, strict=strict) for b in node["anyOf"]], rules)
    if isinstance(node.get("type"), list) and not rules.type_lists:
        node = _single_types(node, rules)
    if "const" in node and rules.keywords is not None and "const" not in rules.keywords:
        node["enum"] = [node.pop("const")]
    if rules.formats is not None and "format" in node and node["format"] not in rules.formats:
        node["description"] = _joined(node.get("description"), f"format: {node.pop('format')}")
    if rules.keywords is not None:
        node = _keep_keywords(node, rules.keywords, deep=False)
    return node


def _union(node: dict[str, Any], branches: list[dict[str, Any]], rules: SchemaProfile) -> dict[str, Any]:
    """One schema for ``anyOf: branches``: a type (list) where it says the same, else the union."""
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    nullable = NULL_SCHEMA in branches
    others = [b for b in branches if b != NULL_SCHEMA]
    if len(others) == 1:
        merged = {**others[0], **rest}
        if "description" in others[0] and "description" in rest:
            merged["description"] = _joined(rest["description"], others[0]["description"])
        return _nullable(merged, rules) if nullable else merged
    if all(set(b) == {"type"} and isinstance(b["type"], str) for b in others) and rules.type_lists:
        types = [b["type"] for b in others] + (["null"] if nullable else [])
        return {**rest, "type": types}
    if not rules.any_of:
        # A grammar compiler gets the loosest single shape; the tool's own validation still decides.
        return {**rest, **_loosest(others, nullable)}
    if nullable:
        if rules.null_style == "nullable":
            return {**rest, "anyOf": others, "nullable": True}
        others = [*others, NULL_SCHEMA]
    return {**rest, "anyOf": others}


def _loosest(branches: list[dict[str, Any]], nullable: bool) -> dict[str, Any]:
    types: list[str] = []
    for branch in branches:
        kind = branch.get("type", [])
        for name in kind if isinstance(kind, list) else [kind]:
            if name and name not in types:
                types.append(name)
    if nullable and "null" not in types:
        types.append("null")
    return {"type": types} if types else {}


def _nullable(node: dict[str, Any], rules: SchemaProfile) -> dict[str, Any]:
    if rules.null_style == "nullable":
        return {**node, "nullable": True}
    kind = node.get("type")
    if isinstance(kind, str):
        node = {**node, "type": [kind, "null"]}
    elif isinstance(kind, list):
        node = {**node, "type": kind if "null" in kind else [*kind, "null"]}
    elif "anyOf" in node:
        return {**node, "anyOf": [*node["anyOf"], NULL_SCHEMA]}
    else:
        return node  # no type: null is already allowed
    if "enum" in node and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
    return node


def _single_types(node: dict[str, Any], rules: SchemaProfile) -> dict[str, Any]:
    types = [t for t in node["type"] if t != "null"]
    node = dict(node)
    if "null" in node["type"]:
        node["nullable"] = True
        if "enum" in node:
            node["enum"] = [v for v in node["enum"] if v is not None]
    if len(types) == 1:
        node["type"] = types[0]
        return node
    node.pop("type")
    node["anyOf"] = [{"type": t} for t in types]
    return node


def _without_null(node: dict[str, Any]) -> dict[str, Any]:
    node = {k: v for k, v in node.items() if k != "default"}
    if "anyOf" in node and NULL_SCHEMA in node["anyOf"]:
        node["anyOf"] = [b for b in node["anyOf"] if b != NULL_SCHEMA]
        if len(node["anyOf"]) == 1:
            (only,) = node.pop("anyOf")
            description = node.get("description")
            node = {**only, **node}
            if description and only.get("description"):
                node["description"] = _joined(description, only["description"])
    elif isinstance(node.get("type"), list) and "null" in node["type"]:
        types = [t for t in node["type"] if t != "null"]
        node["type"] = types[0] if len(types) == 1 else types
    return node


def _close(node: Any) -> None:
    """OpenAI's strict rules, in place: closed objects, every property required, optionals nullable."""
    if isinstance(node, list):
        for item in node:
            _close(item)
        return
    if not isinstance(node, dict):
        return
    node.pop("default", None)
    if node.get("type") == "object" or "properties" in node:
        properties = node.setdefault("properties", {})
        required = set(node.get("required", ()))
        for name, sub in properties.items():
            _close(sub)
            if name not in required:
                properties[name] = _nullable(sub, PROFILES["openai"]) if not accepts_null(sub) else sub
        node["required"] = list(properties)
        node["additionalProperties"] = False
    for key in ("items", "prefixItems", "anyOf"):
        if key in node:
            _close(node[key])


def _keep_keywords(node: Any, keywords: frozenset[str], *, deep: bool = True) -> Any:
    if isinstance(node, list):
        return [_keep_keywords(item, keywords) for item in node] if deep else node
    if not isinstance(node, dict):
        return node
    dropped = {k: v for k, v in node.items() if k not in keywords}
    kept = {k: v for k, v in node.items() if k in keywords}
    hints = constraint_words({k: v for k, v in dropped.items() if k in _CONSTRAINTS})
    if hints:
        kept["description"] = _joined(kept.get("description"), "; ".join(hints))
    if deep:
        if "properties" in kept:
            kept["properties"] = {k: _keep_keywords(v, keywords) for k, v in kept["properties"].items()}
        for key in ("items", "anyOf", "prefixItems"):
            if key in kept:
                kept[key] = _keep_keywords(kept[key], keywords)
    return kept


def _joined(first: str | None, second: str | None) -> str:
    return "; ".join(part for part in (first, second) if part)
