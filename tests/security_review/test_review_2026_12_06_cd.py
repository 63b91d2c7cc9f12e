"""Review of 2026-12-06 (cd): review of review bq and the lead's follow-up (schema bounds, pattern budget).

Each test fails on the reviewed code (main at e274cd0) and states what was found and what is expected.

Findings:

1. Draft 4-7's ``dependencies`` (``dependentSchemas`` before 2019-09) was not among the keywords applying a
   subschema to the same value: ``dependencies: {a: {$ref: "#"}}`` was accepted and validating ``{"a": 1}``
   recursed until ``RecursionError``; a chain of ``allOf`` + ``dependencies`` fanning out 2**30 checks was
   accepted too. A pattern under a ``dependencies`` name that is a data keyword (``default``) was never compiled,
   so every value was refused. ``dependencies`` is now walked as ``dependentSchemas`` is, in both.
2. Draft 3 schemas: ``extends``, ``disallow`` and schemas in ``type`` apply to the same value and were not
   followed (``extends: [{$ref: "#"}]`` recursed until ``RecursionError``); ``extends: {$ref: "#"}`` crashed the
   build check with ``AttributeError`` (``referencing``). Draft 3 is now refused with ``ToolDefinitionError``.
3. The pattern weight probes (one compile up to the engine's 10 MiB each, 0.4 s near a tier's bound) ran every
   time a schema was checked: when its tool was built, again when its validator was built, and for a remote
   tool's output schema twice at every call (a new session per call; the SDK's per-session cache never hit):
   48 ``^\\w{13}xNN$`` patterns (within budget) took 20 s + 24 s of the worker per call, synchronous, past
   ``anyio.fail_after``. Weights are now probed once per process (bounded, by digest).

Checked and holding:

- ``uniqueItems`` canonical forms against jsonschema's ``equal``: ``1``/``1.0`` equal, ``true``/``1`` and
  ``false``/``0`` not (nested too), key order irrelevant, ``0``/``-0.0`` equal, ``2**53+1``/``2.0**53`` not,
  huge integers exact; NaN never equal to another NaN (a JSON extension, as ``equal``).
- The pattern walk finds patterns in ``$defs``/``definitions`` reached only by ``$ref``, ``items`` arrays and
  ``additionalItems``, ``dependentSchemas``, ``propertyNames``, ``contains``, ``not``, ``if``/``then``/``else``,
  each matched by its compiled matcher; a pattern it misses fails closed (no backtracking fallback).
- A developer's ``Tool.create`` schema and a remote tool's ``inputSchema`` (``provider`` -> ``Tool.create``)
  go through the same ``checked_object_schema``; an output schema through ``check_schema_bounds`` (same checks).

Left open:

- A server listing 100 tools, each with 48 distinct patterns near the 640 KiB tier, still costs about 20 s per
  tool to probe at the first build (half an hour per listing): a probe cannot learn a pattern is under a bound
  without compiling up to that bound. Bounding it needs a per-server (or per-listing) probe budget.
"""

import time
import uuid
from typing import Any

import pytest

from toolhub.exceptions import ToolDefinitionError
from toolhub.mcp_client.remote import _check_outputs_in_linear_time
from toolhub.tools import linear_patterns
from toolhub.tools.definition import Tool
from toolhub.tools.jsonschema_args import check_schema_bounds

DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT3 = "http://json-schema.org/draft-03/schema#"


def _create(schema: dict[str, Any]) -> Tool:
    return Tool.create("t", "T.", schema, lambda arguments: arguments, allow_any=True)


def _dependencies_fan_out(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"a{i}": {
            "allOf": [{"$ref": f"#/definitions/a{i + 1}"}],
            "dependencies": {"k": {"$ref": f"#/definitions/a{i + 1}"}},
        }
        for i in range(levels)
    }
    defs[f"a{levels}"] = {"type": "object"}
    return {"$schema": DRAFT7, "type": "object", "definitions": defs, "allOf": [{"$ref": "#/definitions/a0"}]}


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": DRAFT7, "type": "object", "dependencies": {"a": {"$ref": "#"}}},
        _dependencies_fan_out(30),
    ],
    ids=["loop", "fan-out"],
)
def test_a_loop_or_fan_out_through_draft7_dependencies_is_refused(schema: dict[str, Any]) -> None:
    """Found: ``dependencies`` was not followed as a same-value keyword: a loop through it was accepted (validation
    recursed until ``RecursionError``), and so was 2**30 checks of one value.

    Expect: ``ToolDefinitionError`` naming the reference, when the tool is built.
    """
    with pytest.raises(ToolDefinitionError, match="refers to itself before describing any value"):
        _create(schema)


def test_a_pattern_under_a_dependencies_name_like_default_is_matched() -> None:
    """Found: under ``dependencies`` a name such as ``default`` was read as a data keyword: its schema's pattern was
    never compiled, so every value of it was refused.

    Expect: the pattern is compiled and matched (a matching value passes, another fails).
    """
    schema = {
        "$schema": DRAFT7,
        "type": "object",
        "dependencies": {"default": {"properties": {"z": {"pattern": "^d$"}}}},
    }
    tool = _create(schema)
    assert tool.validate_arguments({"default": 1, "z": "d"}) == {"default": 1, "z": "d"}
    with pytest.raises(Exception, match="pattern"):
        tool.validate_arguments({"default": 1, "z": "e"})


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": DRAFT3, "type": "object", "extends": [{"$ref": "#"}]},
        {"$schema": DRAFT3, "type": "object", "extends": {"$ref": "#"}},
        {"$schema": DRAFT3, "type": "object", "disallow": [{"$ref": "#"}]},
    ],
    ids=["extends-list", "extends", "disallow"],
)
def test_a_draft3_schema_is_refused(schema: dict[str, Any]) -> None:
    """Found: draft 3's same-value keywords were not followed (a loop through ``extends`` or ``disallow`` recursed
    until ``RecursionError`` at validation), and ``extends: {$ref: "#"}`` crashed the check with ``AttributeError``.

    Expect: ``ToolDefinitionError`` saying draft 3 is not supported, as an input or an output schema.
    """
    with pytest.raises(ToolDefinitionError, match="draft 3, which is not supported"):
        _create(schema)
    with pytest.raises(ToolDefinitionError, match="draft 3, which is not supported"):
        check_schema_bounds("Tool 'x': the output schema", schema)


def _probes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The weight probes compiled from now on (``pattern_weight``'s repeated patterns)."""
    probes: list[str] = []
    compile_pattern = linear_patterns.compile_pattern

    def counted(pattern: str) -> linear_patterns.Matcher:
        if pattern.startswith("(?:") and pattern.endswith(("){16}", "){4}")):
            probes.append(pattern)
        return compile_pattern(pattern)

    monkeypatch.setattr(linear_patterns, "compile_pattern", counted)
    return probes


def _patterns_schema(count: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]  # patterns no earlier test probed
    return {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "pattern": rf"^\w{{13}}{tag}{i:02d}$"} for i in range(count)},
    }


def test_a_tools_patterns_are_probed_once_not_again_for_its_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: the weight probes ran when the tool was built and again when its validator was built (first call):
    48 ``^\\w{13}...$`` patterns within budget took 20 s and 24 s.

    Expect: each distinct pattern is probed once (its weight kept); validation still matches.
    """
    probes = _probes(monkeypatch)
    schema = _patterns_schema(4)
    tool = _create(schema)
    matching = "é" * 13 + schema["properties"]["p0"]["pattern"].removeprefix(r"^\w{13}").removesuffix("$")
    assert tool.validate_arguments({"p0": matching}) == {"p0": matching}
    with pytest.raises(Exception, match="pattern"):
        tool.validate_arguments({"p1": "x"})
    assert len(probes) == 4


class _Session:
    """What ``_check_outputs_in_linear_time`` uses of the SDK's session: a fresh one per remote call."""

    def __init__(self) -> None:
        self._tool_output_validators: dict[str, Any] = {}


def test_a_remote_output_schema_is_not_probed_again_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: each remote call opens a session, whose output-validator cache starts empty: the output schema's
    bounds check and its validator probed every pattern again, twice per call (44 s for 48 patterns).

    Expect: three calls (sessions) probe each distinct pattern once, and still check results.
    """
    probes = _probes(monkeypatch)
    schema = _patterns_schema(3)
    started = time.monotonic()
    for _ in range(3):
        session = _Session()
        _check_outputs_in_linear_time(session)  # type: ignore[arg-type]
        validator = session._output_schema_validator("grade", schema)  # type: ignore[attr-defined]
        assert not validator.is_valid({"p0": "x"})
    assert len(probes) == 3
    assert time.monotonic() - started < 10
