"""JSON Schema's regular expressions (``pattern``, ``patternProperties``) matched in linear time.

jsonschema runs them with Python's backtracking ``re``: a schema's ``^(a+)+$`` (a remote MCP server chooses its
schemas) against forty characters a model sends holds the process, and its GIL, for hours. Here they run on
Rust's ``regex`` (through pydantic-core, already a dependency), whose matching time is linear in the text. Its
syntax lacks look-around and backreferences: a schema using them is refused when its tool is built, never
matched by a backtracking fallback.
"""

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError as SchemaViolation
from pydantic_core import SchemaError, SchemaValidator, ValidationError, core_schema

__all__ = ["UnsupportedPattern", "compile_pattern", "linear_validator", "schema_patterns"]

Matcher = Callable[[str], bool]

#: Keywords whose values are data, not schemas: a ``pattern`` key inside them is no pattern.
_DATA = frozenset({"const", "enum", "default", "examples"})
#: Keywords mapping names to schemas: their keys are names, any name (``default`` too) holding a schema.
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


class UnsupportedPattern(ValueError):
    """A pattern the linear-time engine cannot run (look-around, a backreference, a syntax error, too large)."""


def compile_pattern(pattern: str) -> Matcher:
    """A search (unanchored, as JSON Schema's) for ``pattern`` in linear time; ``UnsupportedPattern`` if none."""
    try:
        validator = SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex", strict=True))
    except SchemaError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise UnsupportedPattern((lines[-1] if lines else "not a pattern")[:200]) from None

    def matches(text: str) -> bool:
        try:
            validator.validate_python(text)
        except ValidationError:
            return False
        return True

    return matches


def schema_patterns(schema: Any) -> Iterator[tuple[str, str, str]]:
    """Each ``(keyword, pattern, where)`` in ``schema``, walked without recursion (data values skipped)."""
    pending: list[tuple[Any, str, bool]] = [(schema, "", False)]
    while pending:
        node, where, named = pending.pop()
        if isinstance(node, list):
            pending.extend((item, f"{where}/{index}", False) for index, item in enumerate(node))
            continue
        if not isinstance(node, Mapping):
            continue
        if named:  # name -> schema: every value is a schema, whatever its name
            pending.extend((value, f"{where}/{key}", False) for key, value in node.items())
            continue
        if isinstance(node.get("pattern"), str):
            yield "pattern", node["pattern"], f"{where}/pattern" or "/"
        if isinstance(node.get("patternProperties"), Mapping):
            for key in node["patternProperties"]:
                yield "patternProperties", str(key), f"{where}/patternProperties"
        for key, value in node.items():
            if key not in _DATA:
                pending.append((value, f"{where}/{key}", key in _NAMED_SCHEMAS))


def linear_validator(
    schema: Mapping[str, Any], format_checker: jsonschema.FormatChecker | None = None, **options: Any
) -> Any:
    """``schema``'s jsonschema validator (its draft's) with its patterns matched in linear time.

    Each pattern is compiled once, for this validator; one the engine cannot run fails every value checked
    against it (the tool holding it was refused when built, so only a schema checked elsewhere meets this).
    ``options``: passed on to the validator (``registry``).
    """
    matchers: dict[str, Matcher | None] = {}

    def search(pattern: str, text: str) -> bool | None:
        if pattern not in matchers:
            try:
                matchers[pattern] = compile_pattern(pattern)
            except UnsupportedPattern:
                matchers[pattern] = None
        matcher = matchers[pattern]
        return None if matcher is None else matcher(text)

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if validator.is_type(instance, "string") and not search(patrn, instance):
            yield SchemaViolation(f"the value does not match {patrn!r}")

    def pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                found = search(patrn, key)
                if found is None:
                    yield SchemaViolation(f"the pattern {patrn!r} is not supported")
                elif found:
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if not validator.is_type(instance, "object"):
            return
        named, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
        extras = [key for key in instance if key not in named and not any(search(patrn, key) for patrn in patterns)]
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif not extra and extras:
            yield SchemaViolation("Additional properties are not allowed")

    cls = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        jsonschema.validators.validator_for(schema),
        {"pattern": pattern, "patternProperties": pattern_properties, "additionalProperties": additional_properties},
    )
    for _, patrn, _ in schema_patterns(schema):
        search(patrn, "")
    return cls(schema, format_checker=format_checker, **options)
