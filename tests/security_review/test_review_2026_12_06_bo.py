"""Review of 2026-12-06 (bo): review the reviews bi (database roles), bf (subagents), bh (schema depth and loops).

Each test fails on the reviewed code (main at 97171a2) and states what was found and what is expected.

Findings:

1. (bh) ``checked_object_schema`` bounded how deeply ``$ref`` and same-value keywords nest (64) but not how many
   schemas they fan out to: ``a0: allOf [$ref a1, $ref a1]``, ``a1: allOf [$ref a2, $ref a2]``... (a few hundred
   bytes, 36 deep at 18 levels) was accepted, and validating one string against it checked it 2**18 times (15 s
   measured; 25 levels is half an hour of a web or worker process per call, from a remote MCP server's listing).
   The loop check now also counts the schemas a value is checked against, repeats included, up to
   ``MAX_SCHEMA_APPLICATIONS`` (10,000), in the same linear walk.

Checked and holding (no test here):

- (bh) The non-recursive walks are linear: ``_nodes`` and ``_nesting`` walk the document tree (a shared ``$ref`` is
  not followed), ``_looping_ref`` finishes each node once (memoized by identity, the registry hands back the
  schema's own dicts). Recursive types through ``properties``/``items`` (a tree, ``$ref: "#"`` to the root under
  a property) stay accepted and validate; a schema shared by many properties counts once per property.
"""

import time
from typing import Any

import pytest

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.definition import Tool
from toolhub.tools.jsonschema_args import MAX_SCHEMA_APPLICATIONS


def _fan_out(levels: int, width: int = 2) -> dict[str, Any]:
    defs: dict[str, Any] = {f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}] * width} for i in range(levels)}
    defs[f"a{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs}


@pytest.mark.parametrize(("levels", "width"), [(30, 2), (12, 4), (3, 30)])
def test_a_fan_out_of_shared_references_is_refused_when_built(levels: int, width: int) -> None:
    """Found: shared ``$ref`` s fanned out by ``allOf`` were accepted; validating one value checked it against
    ``width ** levels`` schemas (2**18: 15 s).

    Expect: the tool is refused when built, quickly, naming the bound; nothing is validated against it.
    """
    started = time.monotonic()
    with pytest.raises(ToolDefinitionError, match=f"more than {MAX_SCHEMA_APPLICATIONS} schemas for one value"):
        Tool.create("crm__laughs", "Laughs.", _fan_out(levels, width), lambda arguments: arguments, allow_any=True)
    assert time.monotonic() - started < 2


def test_shared_definitions_and_recursive_types_stay_schemas() -> None:
    """A definition shared by many properties, a small fan-out, and a tree through ``$ref: "#"`` remain accepted."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            **{f"p{i}": {"$ref": "#/$defs/item"} for i in range(200)},
            "small": _fan_out(6, 3)["properties"]["x"],
            "child": {"$ref": "#"},
        },
        "$defs": {**_fan_out(6, 3)["$defs"], "item": {"allOf": [{"$ref": "#/$defs/a5"}, {"minLength": 1}]}},
    }
    tool = Tool.create("crm__shared", "Shared.", schema, lambda arguments: arguments, allow_any=True)
    value = {"p0": "x", "small": "y", "child": {"p1": "z", "child": {}}}
    assert tool.validate_arguments(value) == value
