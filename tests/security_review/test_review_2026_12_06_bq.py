"""Review of 2026-12-06 (bq): review of reviews bm/bp (linear-time patterns) and bh/bo (schema bounds).

Each test fails on the reviewed code (main at 864332f) and states what was found and what is expected.

Findings:

1. Patterns were bounded one by one (the engine refuses one compiling past 10 MiB), not per schema: a validator
   keeps every pattern of its schema compiled, and fifty distinct ``\\w{200}xN`` (600 bytes of a remote server's
   ``inputSchema``) held 583 MiB in every process that validated one call (6 s to build), any number more
   without bound. A schema's distinct patterns are now budgeted together when its tool is built
   (``MAX_SCHEMA_PATTERNS`` = 48, ``MAX_SCHEMA_PATTERN_BYTES`` = 32 MiB, a pattern counting 640 KiB or, past
   that, the engine's 10 MiB), refused with ``ToolDefinitionError`` naming the keyword and where; a remote tool
   holding such a schema is left out alone. Validators compile within the same budget (``schema_matchers``).
2. A remote tool's ``outputSchema`` is not pinned when the tool is accepted and was checked by the SDK's
   ``check_schema`` only: a ``$ref`` fan-out (``a0: allOf [a1, a1]``...) checked each result 2**n times in the
   worker (past ``anyio.fail_after``: the check is synchronous), and fifty large patterns held hundreds of MiB.
   An output schema is now held to the bounds of an input schema (``check_schema_bounds``: nesting, loops,
   fan-out, pattern budget) before its validator is built; the call fails with "Invalid schema for tool ...".

3. A lone surrogate in a string (JSON ``"\ud800"``, which a model may send) made the Rust engine refuse the whole
   text, which read as "no match": ``not: {pattern: "^rm "}`` admitted ``"rm -rf /\ud800"``, and a
   ``patternProperties`` key holding one skipped its schema (any value passed). Lone surrogates are now matched
   as U+FFFD (one character, as they were).
4. ``uniqueItems``: jsonschema compares unhashable items pair by pair; 3,000 small objects (30 KB of arguments)
   took 62 s of the process. Items are now compared by a hashable canonical form (``linear_keywords``), at once.
5. ``multipleOf`` with a float divisor against an integer past a float's range (400 digits; ``json`` reads it
   exactly) raised ``OverflowError`` out of argument validation; it is now a failed check.
6. A ``$dynamicRef`` resolving nowhere in the schema (``http://host/x#a``) passed the dangling-reference check,
   which looked up ``$ref`` only; validating made jsonschema's default registry GET the URL (any address, outside
   the outbound policy, no timeout) and validate against the answer. ``$dynamicRef`` s are now looked up too, and
   ``linear_validator`` uses an empty registry unless given one, so nothing is ever fetched.

Checked and holding (no test here):

- Patterns on non-strings: ``pattern`` applies to strings only (JSON Schema), ``patternProperties`` keys are
  always strings; ``propertyNames: {pattern}`` goes through the same ``pattern`` keyword (linear).
- ``format`` on 1 MB strings (``idn-hostname``, ``email``, ``date-time``, ``time``, ``ipv6``, ``json-pointer``):
  each at most 0.1 s; ``regex`` is published, not checked. ``minLength`` on 10 M characters: 0.01 s.
- ``multipleOf: 1e-308`` against ``1e308``: jsonschema catches the float overflow (refused). ``contains`` with
  ``minContains`` over 100,000 items: linear (1.2 s). ``if``/``then``/``else``, ``dependentSchemas``: in the
  fan-out bound's same-value keywords. ``$id``/``$anchor``: the build check's registry holds this schema only,
  so a ``$ref`` to another document's ``$id`` is dangling and refused; ``$recursiveRef`` is no 2020-12 keyword.
- ``enum``/``const``: membership is linear in the schema's own size, which the administrator accepted.

Left open:

- ``outputSchema`` is not among ``PINNED_FIELDS``: a server may change it after acceptance without quarantine (it
  is now held to the bounds at each call, not reviewed by anyone). Pinning it re-quarantines every remote tool.
- The pattern weight is tiered (640 KiB, 2.5 MiB or 10 MiB; three tiers after the lead's integration, which found
  four ``^\\w{1,32}$``-like patterns refused with two): Rust's ``regex`` tells no compiled size through
  pydantic-core, and finer probes cost more at build. Past a dozen mid-sized Unicode patterns a schema is refused;
  the message points to ASCII classes.
- An ``enum`` error joins every member's ``repr`` before cutting it to 100 characters (one schema's size per error).
- ``_canonical`` (``uniqueItems``) recurses as jsonschema's ``equal`` does: its depth is the value's, which
  ``json`` decoding already bounds by the recursion limit.
- The output check relies on the SDK's private ``_output_schema_validator``/``_tool_output_validators``.
"""

import http.server
import logging
import threading
import time
from typing import Any, ClassVar

import pytest
from django.contrib.auth.models import User
from pydantic import ValidationError

from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.exceptions import ToolDefinitionError
from toolhub.mcp_client.definitions import definition_hash
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.remote import RemoteServerError, remote_call, remote_tools
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import Tenant
from toolhub.tools import linear_patterns
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry


def _large_patterns(count: int) -> dict[str, Any]:
    """``count`` properties, each with a distinct pattern compiling near the engine's 10 MiB bound (Unicode \\w)."""
    return {f"p{i}": {"type": "string", "pattern": rf"\w{{200}}x{i}"} for i in range(count)}


def _fan_out(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}] * 2} for i in range(levels)}
    defs[f"a{levels}"] = {"type": "string"}
    return defs


def _create(schema: dict[str, Any]) -> Tool:
    return Tool.create("t", "T.", schema, lambda arguments: arguments, allow_any=True)


def test_a_schemas_large_patterns_are_bounded_together() -> None:
    """Found: four (or fifty) distinct ``\\w{200}xN`` patterns, each under the engine's bound, were accepted.

    Expect: ``ToolDefinitionError`` naming the keyword, where, and the budget, within a few seconds.
    """
    started = time.monotonic()
    with pytest.raises(ToolDefinitionError, match=r"'pattern' at /properties/p\d+/pattern .* more than 32 MiB"):
        _create({"properties": _large_patterns(50)})
    assert time.monotonic() - started < 10


def test_a_schemas_many_patterns_are_bounded_together() -> None:
    """Found: any number of distinct patterns was accepted, each compiled and kept by the tool's validator.

    Expect: past ``MAX_SCHEMA_PATTERNS`` distinct ones, ``ToolDefinitionError`` naming the keyword and the bound.
    """
    bound = linear_patterns.MAX_SCHEMA_PATTERNS
    properties = {f"p{i}": {"type": "string", "pattern": f"^a{i}$"} for i in range(bound + 1)}
    with pytest.raises(ToolDefinitionError, match=f"'pattern' at .* more than {bound} distinct"):
        _create({"properties": properties})


def test_a_schema_within_the_pattern_budget_is_still_a_schema() -> None:
    """A large pattern, repeated anywhere (counted once), beside many small ones; the key pattern too."""
    properties: dict[str, Any] = {f"p{i}": {"type": "string", "pattern": f"^a{i}$"} for i in range(30)}
    properties |= {f"w{i}": {"type": "string", "pattern": r"^\w{200}$"} for i in range(20)}
    tool = _create({"properties": properties, "patternProperties": {"^x_": {"type": "integer"}}})
    assert tool.validate_arguments({"p3": "a3", "w0": "é" * 200, "x_1": 1}) == {"p3": "a3", "w0": "é" * 200, "x_1": 1}
    with pytest.raises(Exception, match="pattern"):
        tool.validate_arguments({"w1": "é" * 199})


def test_a_dozen_mid_sized_unicode_patterns_fit_the_budget() -> None:
    """Found (lead's integration): the budget's first estimate counted any pattern past 640 KiB as the engine's
    whole 10 MiB, so four distinct ``^\\w{1,32}$``-like patterns (about 2 MiB each), a common schema, were refused.

    Expect: twelve of them are accepted and matched; a thirteenth spends the budget.
    """
    properties = {f"n{i}": {"type": "string", "pattern": rf"^\w{{1,{32 - i}}}$"} for i in range(12)}
    tool = _create({"properties": properties})
    assert tool.validate_arguments({"n0": "é" * 32}) == {"n0": "é" * 32}
    with pytest.raises(Exception, match="pattern"):
        tool.validate_arguments({"n0": "é" * 33})
    properties["n12"] = {"type": "string", "pattern": r"^\w{1,19}$"}
    with pytest.raises(ToolDefinitionError, match="more than 32 MiB"):
        _create({"properties": properties})


def test_one_remote_tool_past_the_pattern_budget_is_left_out_alone(
    tenant: Tenant, operator: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: a server's ``inputSchema`` with fifty large patterns was accepted (583 MiB in each process).

    Expect: that tool alone is left out of the registry, the log naming it and the keyword; the other stays.
    """
    fake = FakeCrm()
    fake.extra_tools = [
        {"name": "heavy", "description": "Heavy.", "inputSchema": {"type": "object", "properties": _large_patterns(4)}}
    ]
    monkeypatch.setenv("CRM_TOKEN_ACME", "token-acme")
    with serving(fake) as url:
        server = RemoteMcpServer.objects.create(
            name="crm", url=url, risk="low", select_names=["lookup_customer", "heavy"]
        )
        RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME")
        remote_server_sync(server=server, actor="operator:operator")
    with caplog.at_level(logging.WARNING, logger="toolhub"):
        for row in RemoteMcpTool.objects.all():
            remote_tool_accept(row=row, actor="operator:operator", user=operator)
        assert registry.get("crm__heavy") is None
    assert registry.get("crm__lookup_customer") is not None
    assert any("crm__heavy" in r.getMessage() and "MiB" in r.getMessage() for r in caplog.records)


#: Output schemas a server may list (unpinned) that made checking each result unbounded.
UNBOUNDED_OUTPUTS: dict[str, dict[str, Any]] = {
    "fan-out": {
        "type": "object",
        "properties": {"customer": {"$ref": "#/$defs/a0"}},
        "$defs": _fan_out(17),
    },
    "large patterns": {"type": "object", "properties": _large_patterns(4)},
}


@pytest.mark.parametrize("case", UNBOUNDED_OUTPUTS)
def test_a_remote_output_schema_is_held_to_an_input_schemas_bounds(case: str) -> None:
    """Found: the output schema was checked by ``check_schema`` only: 2**17 checks of one result (seconds of the
    worker, doubling per level), or large patterns compiled for one call past any budget (583 MiB for fifty).

    Expect: the call fails at once saying the output schema is invalid, naming why.
    """
    fake = FakeCrm()
    fake.extra_tools = [
        {
            "name": "grade",
            "description": "Grades a customer.",
            "inputSchema": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
            "outputSchema": UNBOUNDED_OUTPUTS[case],
        }
    ]
    with serving(fake) as url:
        listed = next(t for t in remote_tools(url=url, name="crm", headers={}, timeout=30) if t["name"] == "grade")
        started = time.monotonic()
        with pytest.raises(RemoteServerError, match="Invalid schema for tool grade: Tool 'grade': the output schema"):
            remote_call(
                url=url,
                name="crm",
                headers={},
                timeout=60,
                remote_name="grade",
                arguments={"customer_id": "acme"},
                meta={},
                accepted_hash=definition_hash(listed),
            )
        assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("schema", "arguments"),
    [
        ({"properties": {"cmd": {"type": "string", "not": {"pattern": "^rm "}}}}, {"cmd": "rm -rf /\ud800"}),
        ({"properties": {}, "patternProperties": {"^n_": {"type": "integer"}}}, {"n_a\udfff": "not an integer"}),
        ({"properties": {"code": {"type": "string", "pattern": "^a"}}}, None),
    ],
    ids=["not-pattern", "patternProperties", "pattern"],
)
def test_a_lone_surrogate_does_not_make_every_pattern_fail_to_match(
    schema: dict[str, Any], arguments: dict[str, Any] | None
) -> None:
    """Found: a lone surrogate (JSON ``"\\ud800"``) in a string made the Rust engine refuse the whole text, read
    as "no match": ``not: {pattern: "^rm "}`` admitted ``"rm -rf /\\ud800"`` and a ``patternProperties`` key
    skipped its schema (any value passed); ``^a`` refused ``"a\\ud800"``.

    Expect: each lone surrogate is matched as one character (U+FFFD): the first two are refused, the last valid.
    """
    tool = _create(schema)
    if arguments is None:
        assert tool.validate_arguments({"code": "a\ud800"}) == {"code": "a\ud800"}
        return
    with pytest.raises(ValidationError):
        tool.validate_arguments(arguments)


def test_unique_items_of_many_objects_is_checked_in_linear_time() -> None:
    """Found: jsonschema compares objects in a ``uniqueItems`` array pair by pair: 3,000 small objects (30 KB a
    model sends) took about a minute of the process checking them.

    Expect: checked at once; equality as JSON Schema says (``1`` is ``1.0``, not ``true``; key order ignored).
    """
    tool = _create({"properties": {"items": {"type": "array", "uniqueItems": True}}})
    many = [{"id": i, "tags": [i, str(i)]} for i in range(3000)]
    started = time.monotonic()
    assert tool.validate_arguments({"items": many}) == {"items": many}
    assert time.monotonic() - started < 2
    with pytest.raises(ValidationError, match="uniqueItems"):
        tool.validate_arguments({"items": [*many, {"tags": [2999, "2999"], "id": 2999.0}]})
    assert tool.validate_arguments({"items": [1, True, [1], [True], {"a": 1}, {"a": True}]})


def test_multiple_of_a_float_on_a_huge_integer_is_a_failed_check_not_a_crash() -> None:
    """Found: ``multipleOf: 0.1`` against a 400-digit integer (valid JSON, read exactly) raised ``OverflowError``
    out of the tool's argument validation.

    Expect: a value that is no multiple fails the check, reported as any other problem (``ValidationError``);
    ordinary ones pass. Since review fm the division is exact: ``10**400`` is a multiple of ``0.5`` and passes.
    """
    tool = _create({"properties": {"amount": {"type": "number", "multipleOf": 0.5}}})
    with pytest.raises(ValidationError, match="multipleOf"):
        _create({"properties": {"amount": {"type": "number", "multipleOf": 0.3}}}).validate_arguments(
            {"amount": 10**400 + 1}
        )
    assert tool.validate_arguments({"amount": 10**400}) == {"amount": 10**400}
    assert tool.validate_arguments({"amount": 2.5}) == {"amount": 2.5}


class _SchemaHost(http.server.BaseHTTPRequestHandler):
    """Serves a schema to anyone asking, and notes who asked (jsonschema's default registry fetching it)."""

    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        self.asked.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"$dynamicAnchor": "a", "type": "integer"}')

    def log_message(self, *args: Any) -> None:
        """Quiet."""


def test_a_dynamic_reference_to_a_url_is_refused_when_built_never_fetched() -> None:
    """Found: a ``$dynamicRef`` resolving nowhere in the schema (``http://host/x#a``) passed the dangling check
    (``$ref`` only), and validating a value made jsonschema's default registry GET that URL from the web process
    (any address, outside the outbound policy, no timeout), the answer then deciding the value.

    Expect: ``ToolDefinitionError`` naming the reference when built; nothing is fetched.
    """
    server = http.server.HTTPServer(("127.0.0.1", 0), _SchemaHost)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/x#a"
    try:
        with pytest.raises(ToolDefinitionError, match="resolve to nothing within it"):
            _create({"properties": {"x": {"$dynamicRef": url}}}).validate_arguments({"x": 1})
    finally:
        server.shutdown()
        server.server_close()
    assert _SchemaHost.asked == []
