"""Review 2026-12-06 (et): remote MCP listings and the schema validation budget (reviews ds, eb), attacked.

Each test fails on the reviewed code (main at 98885c5) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The validation budget counted one step per keyword applied (and per error), whatever the keyword read. Several
   keywords read the whole value each time they are applied: ``enum``, ``const`` and ``uniqueItems`` walk it into
   its canonical form, ``pattern`` and ``format`` scan its characters, ``additionalProperties`` its names,
   ``required`` and ``properties`` their own lists. Applied thousands of times to one value (an ``allOf`` of
   4,000, or a ``$ref`` fan-out, within ``MAX_SCHEMA_APPLICATIONS``), far under the 50,000 steps: 4,000 ``enum`` s
   against one 130 KB array (100 KB of schema, a remote ``inputSchema``) took 80 s of the web process, 4,000
   ``const`` s 162 s, 4,000 ``uniqueItems`` 86 s, 4,000 ``pattern`` s on a 90 KB string 12.5 s, 1,024
   ``additionalProperties`` on 9,000 names 7 s (measured by hand on the code as found). A step now stands for
   ``UNITS_PER_STEP`` units of work: a keyword is charged, beside its step, for reading its instance and its own
   list or mapping shallowly (``read_units``; ``enum``/``const`` members are read once per validator), a canonical
   walk a unit per node, a pattern match per call and per ten characters (``spend``). The same checks now stop at
   the budget in about two seconds, refused as "send fewer items".
2. A schema was checked against its draft's metaschema every time it was used: about 1 ms a subschema. A remote
   tool's accepted ``outputSchema`` is checked at every call (a session per call, the SDK checks each result),
   synchronously in the worker's event loop where the call's timeout cannot cut it, and its ``inputSchema`` at every
   registry build (every governance change, in every process): 9,000 properties (130 KB) cost 8.6 s each time. A
   schema found valid is now kept by digest (``toolhub.tools.valid_schemas``, the latest 4,096) and not checked
   against the metaschema again; its other bounds (patterns, references) are checked as before.

Checked and holding:

- Listing names differing only by case or ``-``/``_`` get one local name (``confusable_key``: the second is
  skipped); non-ASCII letters (a Cyrillic ``а``, a decomposed accent) become ``_`` in the local name, so they
  cannot read as another tool's name to the model; the call matches the remote name exactly, as the SDK's
  output-schema cache does (one entry per exact name), and a name listed twice exactly is refused (review eb).
- A tool renamed between the listing and the call: the pin hashes ``name``; a renamed tool is no longer listed, the
  call is refused and the tool marked removed, nothing sent.
- Pagination: at most 100 pages are read, a cursor repeated or looping ends there; the pages together are cut at
  the answer byte limit (``bounded_async_responses``); a tool listed on two pages with different definitions is a
  name listed twice (refused). ``inputSchema`` ``$ref`` cycles, remote ``$ref`` s, nesting past 64 and
  backtracking patterns are refused when the tool is built (``check_schema_bounds``, ``linear_patterns``).
- A tagged ``oneOf`` (8 variants, ``const`` tags) over many items ends in the budget's clear refusal ("send fewer
  items at a time"), not a crash: about 660 items pass with the charges above, 700 are refused.
- ``multipleOf`` with tiny float divisors and 1e308 values: ``OverflowError`` is caught (a failed check). A
  structured result is checked against the listed (pinned) ``outputSchema`` within the budget; the error text of a
  remote ``isError`` answer has the credential replaced and is cut to 1,000 characters; a result past
  ``MAX_EXTERNAL_RESULT_BYTES`` is refused whole; image blocks are dropped (text blocks only).

Left (not a finding here): jsonschema's float ``multipleOf`` takes a quotient that underflows to 0 for a multiple:
``1e-30`` passes ``multipleOf: 1e300`` (the value is all but zero). The 100-page cap of a listing ends it silently:
a server paging past it lists its later tools as gone (they are marked removed, its own doing).
"""

from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.mcp_client.definitions import definition_hash
from toolhub.mcp_client.remote import remote_call, remote_tools
from toolhub.tools.definition import Tool

BUDGET = "send fewer items"


def _tool(name: str, properties: dict[str, Any], **schema: Any) -> Tool:
    return Tool.create(
        name,
        "Takes values.",
        {"type": "object", "properties": properties, **schema},
        lambda arguments, ctx: None,
        allow_any=True,
    )


@pytest.mark.parametrize(
    "rule",
    [{"enum": [[1]]}, {"const": [1]}, {"uniqueItems": True}],
    ids=["enum", "const", "uniqueItems"],
)
def test_keywords_that_walk_the_whole_value_are_charged_for_the_walk(rule: dict[str, Any]) -> None:
    """Found: ``enum``/``const``/``uniqueItems`` walk the whole value each time they are applied, one step each:
    200 of them in an ``allOf`` against a 40,000-item array (120 KB of arguments) were 201 steps and 4-8 s of the
    web process (4,000 of them, 80-162 s), checked to the end.

    Expect: the walk is charged (a unit a node): the check stops at the budget and says so; the same keyword applied
    once to that array, and 200 times to a short one, still passes.
    """
    many = _tool(f"many_{next(iter(rule))}", {"xs": {"type": "array", "allOf": [rule] * 200}})
    with pytest.raises(ValidationError, match=BUDGET):
        many.validate_arguments({"xs": list(range(2, 40_002))} if "uniqueItems" in rule else {"xs": [0] * 40_000})
    assert many.validate_arguments({"xs": [1]}) == {"xs": [1]}
    once = _tool(f"once_{next(iter(rule))}", {"xs": {"type": "array", "uniqueItems": True}})
    assert once.validate_arguments({"xs": list(range(40_000))})


def test_a_pattern_applied_many_times_to_a_long_string_is_charged_for_its_characters() -> None:
    """Found: each ``pattern`` applied cost one step whatever the string's length: 400 in an ``allOf`` on a 90 KB
    string were 401 steps (4,000 of them, 12.5 s).

    Expect: each match is charged for the characters it scans: the check stops at the budget; one pattern on that
    string still passes.
    """
    text = "a" * 90_000
    many = _tool("many_patterns", {"s": {"type": "string", "allOf": [{"pattern": "^a*$"}] * 400}})
    with pytest.raises(ValidationError, match=BUDGET):
        many.validate_arguments({"s": text})
    once = _tool("one_pattern", {"s": {"type": "string", "pattern": "^a*$"}})
    assert once.validate_arguments({"s": text}) == {"s": text}


def test_keywords_reading_every_name_are_charged_for_the_names() -> None:
    """Found: ``required`` reads its whole list each time, ``additionalProperties`` every name of the object, one
    step each: 600 references to one ``required`` of 9,000 names (94 KB of schema) against an object holding them
    (100 KB) were 5.4 million lookups in 1,201 steps (1,024 ``additionalProperties`` over 9,000 names: 7 s).

    Expect: the names read are charged: the check stops at the budget; the rule applied once still passes.
    """
    names = [f"k{i}" for i in range(9_000)]
    value = dict.fromkeys(names, 0)
    many = _tool("many_required", {}, allOf=[{"$ref": "#/$defs/all"}] * 600, **{"$defs": {"all": {"required": names}}})
    with pytest.raises(ValidationError, match=BUDGET):
        many.validate_arguments(value)
    once = _tool("one_required", dict.fromkeys(names, {}), required=names, additionalProperties=False)
    assert once.validate_arguments(value) == value


def test_pattern_properties_are_charged_per_name_matched() -> None:
    """Found: ``patternProperties`` matches each of its patterns with each name of the object: 48 patterns and
    9,000 names were 432,000 matches (about 0.9 s) for one step; five such applications 6 steps, 4.5 s.

    Expect: each match is charged: the check stops at the budget; one application on fewer names still passes.
    """
    patterns = {f"^k{i}x": {} for i in range(48)}
    value = {f"k{i}": 0 for i in range(9_000)}
    many = _tool("many_pattern_properties", {}, allOf=[{"patternProperties": patterns}] * 5)
    with pytest.raises(ValidationError, match=BUDGET):
        many.validate_arguments(value)
    once = _tool("one_pattern_properties", {}, patternProperties=patterns)
    assert once.validate_arguments({"k1": 0, "k2": 0}) == {"k1": 0, "k2": 0}


def _metaschema_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many properties each schema checked against draft 2020-12's metaschema held, in order."""
    checked: list[int] = []
    original = jsonschema.Draft202012Validator.check_schema.__func__  # type: ignore[attr-defined]

    def counting(cls: Any, schema: Any, *args: Any, **kwargs: Any) -> None:
        checked.append(len(schema.get("properties", {})) if isinstance(schema, dict) else 0)
        original(cls, schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(counting))
    return checked


_WIDE = {"customer": {"type": "string"}, "tier": {"type": "string"}} | {f"f{i}": {"type": "string"} for i in range(900)}


def test_a_schema_already_found_valid_is_not_checked_against_the_metaschema_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: a schema is checked against its draft's metaschema each time a tool is built from it and, for a
    remote tool's ``outputSchema``, at every call (a session per call, and the SDK checks each result): about
    1 ms a subschema, synchronous in the worker's event loop, where the call's timeout cannot cut it. An accepted
    schema of 9,000 properties (130 KB) cost 8.6 s at every call, and again for each tool in every process at
    every governance change (the registry rebuilds remote tools).

    Expect: a schema found valid is not checked again in the process (kept by digest); a different one still is.
    """
    checked = _metaschema_checks(monkeypatch)
    for name in ("wide_first", "wide_again"):
        Tool.create(name, "Takes many fields.", {"type": "object", "properties": _WIDE}, lambda a, ctx: None)
    assert checked.count(len(_WIDE)) == 1

    fake = FakeCrm()
    output = {"type": "object", "properties": {**_WIDE, "extra": {"type": "integer"}}}
    fake.extra_tools = [
        {"name": "grade", "description": "Grades.", "inputSchema": {"type": "object"}, "outputSchema": output}
    ]
    with serving(fake) as url:
        listed = next(tool for tool in remote_tools(url, name="crm", headers={}, timeout=30) if tool["name"] == "grade")
        for _ in range(3):
            outcome = remote_call(
                url,
                name="crm",
                headers={},
                timeout=30,
                remote_name="grade",
                arguments={"customer_id": "c1"},
                meta={},
                accepted_hash=definition_hash(listed),
            )
            assert outcome.structured == {"customer": "c1", "tier": "gold"}
    assert checked.count(len(output["properties"])) == 1
