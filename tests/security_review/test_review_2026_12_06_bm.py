"""Review of 2026-12-06 (bm): regular expressions a tool's JSON Schema brings, run on a model's arguments.

Each test fails on the reviewed code (main at d1d4f6e) and states what was found and what is expected.

Findings:

1. ``pattern``, ``patternProperties`` keys (and ``additionalProperties``, which re-runs those keys) of a tool's
   JSON Schema (``Tool.create``/``Tool.external`` schema, or a remote MCP server's ``inputSchema`` an administrator
   accepted) were run by jsonschema with Python's backtracking ``re``: ``^(a+)+$`` against 40 characters sent by
   a (prompt-injected) model held the web process's CPU, and its GIL, for longer than anyone waits. They are now
   matched by Rust's ``regex`` (pydantic-core; linear time), compiled once when the validator is built.
2. A pattern that engine cannot run (look-around, backreferences: ECMA-262 has them) was accepted; it is now
   refused when the tool is built (``ToolDefinitionError`` naming the keyword and where), so a remote tool holding
   one is left out with that reason, never matched by a backtracking fallback.
3. ``unevaluatedProperties`` re-runs every ``patternProperties`` key with ``re`` inside jsonschema: a schema with
   both is refused when built.

Checked and holding (no test here):

- ``format: "regex"`` is published, not checked (no engine of ECMA-262's dialect), so a model's value is never
  compiled as a pattern.
- pydantic-typed tools (``Field(pattern=...)``) already use pydantic-core's Rust engine.
- Matching is a search (unanchored) as JSON Schema says: ``"b"`` matches ``"abc"``, ``"^b"`` does not.
"""

import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.exceptions import ToolDefinitionError
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import Tenant
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

EVIL = "^(a+)+$"
SLOW = "a" * 40 + "!"

#: Each schema, the arguments that made ``re`` backtrack for minutes, and the verdict (the key matches no pattern).
BACKTRACKING: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "pattern": ({"properties": {"code": {"type": "string", "pattern": EVIL}}}, {"code": SLOW}, "refused"),
    "patternProperties": (
        {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}},
        {SLOW: "x"},
        "valid",
    ),
    "additionalProperties": (
        {"properties": {}, "patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False},
        {SLOW: 1},
        "refused",
    ),
    "propertyNames": ({"type": "object", "propertyNames": {"pattern": EVIL}}, {SLOW: 1}, "refused"),
}

#: Run in a child process: ``re`` holds the GIL while it backtracks, so no thread of the test could time it out.
CHILD = """
import json, sys
from pydantic import ValidationError
from toolhub.tools.definition import Tool
schema, arguments = json.loads(sys.argv[1])
tool = Tool.create("t", "T.", schema, lambda arguments: arguments, allow_any=True)
try:
    tool.validate_arguments(arguments)
    print("valid")
except ValidationError as exc:
    print("refused", exc.error_count())
"""


@pytest.mark.parametrize("case", BACKTRACKING, ids=list(BACKTRACKING))
def test_a_backtracking_pattern_checks_a_models_arguments_in_linear_time(case: str) -> None:
    """Found: jsonschema ran ``^(a+)+$`` with Python's ``re`` on 40 characters of the model's: it never finished.

    Expect: the verdict comes at once (well within 20 s, in a child process so a regression fails fast).
    """
    schema, arguments, verdict = BACKTRACKING[case]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps([schema, arguments])],
            capture_output=True,
            text=True,
            timeout=20,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"validating {case} with a backtracking pattern ran longer than 20 s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[0] == verdict, done.stdout


def test_a_pattern_matches_as_json_schema_says() -> None:
    """Searches, unanchored, Unicode classes and named groups included; keys of ``patternProperties`` likewise."""
    tool = Tool.create(
        "t",
        "T.",
        {
            "properties": {"code": {"type": "string", "pattern": r"(?<year>\d{4})-\p{L}"}},
            "patternProperties": {"^x_": {"type": "integer"}},
            "additionalProperties": False,
        },
        lambda arguments: arguments,
        allow_any=True,
    )
    assert tool.validate_arguments({"code": "on 2026-é!", "x_a": 1}) == {"code": "on 2026-é!", "x_a": 1}
    with pytest.raises(Exception, match="pattern"):
        tool.validate_arguments({"code": "2026-1"})
    with pytest.raises(Exception, match="x_b"):
        tool.validate_arguments({"x_b": "not an integer"})
    with pytest.raises(Exception, match="Extra inputs"):
        tool.validate_arguments({"y_a": 1})


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"properties": {"code": {"type": "string", "pattern": "(?=a)a"}}}, "pattern"),
        ({"type": "object", "patternProperties": {r"^(a)\1$": {}}}, "patternProperties"),
        ({"properties": {"x": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"pattern": "(?<!b)a"}}}, "pattern"),
    ],
    ids=["lookahead", "backreference", "in-defs"],
)
def test_a_pattern_no_linear_engine_runs_is_refused_when_built(schema: dict[str, Any], keyword: str) -> None:
    """Found: look-around and backreferences (ECMA-262 has them) were accepted and run by a backtracking engine.

    Expect: ``ToolDefinitionError`` naming the keyword, so the schema is never matched by backtracking.
    """
    with pytest.raises(ToolDefinitionError, match=f"'{keyword}'"):
        Tool.create("t", "T.", schema, lambda arguments: arguments, allow_any=True)


def test_unevaluated_properties_with_pattern_properties_is_refused_when_built() -> None:
    """Found: ``unevaluatedProperties`` makes jsonschema re-run every ``patternProperties`` key with ``re``.

    Expect: a schema holding both is refused when built; either alone is still accepted.
    """
    both = {"type": "object", "patternProperties": {"^x_": {}}, "unevaluatedProperties": False}
    with pytest.raises(ToolDefinitionError, match="unevaluatedProperties"):
        Tool.create("t", "T.", both, lambda arguments: arguments, allow_any=True)
    alone = Tool.create(
        "t", "T.", {"type": "object", "unevaluatedProperties": False}, lambda arguments: arguments, allow_any=True
    )
    assert alone.validate_arguments({}) == {}


def test_an_accepted_remote_tool_with_a_lookaround_pattern_is_left_out_with_its_reason(
    tenant: Tenant, operator: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: a server's ``inputSchema`` with a look-ahead ``pattern`` was accepted and run by ``re``.

    Expect: that tool alone is left out of the registry, the log saying why; the server's other tool stays.
    """
    fake = FakeCrm()
    fake.extra_tools = [
        {
            "name": "look",
            "description": "Looks ahead.",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(?=a)a+$"}}},
        }
    ]
    monkeypatch.setenv("CRM_TOKEN_ACME", "token-acme")
    with serving(fake) as url:
        server = RemoteMcpServer.objects.create(
            name="crm", url=url, risk="low", select_names=["lookup_customer", "look"]
        )
        RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME")
        remote_server_sync(server=server, actor="operator:operator")
    with caplog.at_level(logging.WARNING, logger="toolhub"):
        for row in RemoteMcpTool.objects.all():
            remote_tool_accept(row=row, actor="operator:operator", user=operator)
        assert registry.get("crm__look") is None
    assert registry.get("crm__lookup_customer") is not None
    assert any("crm__look" in r.getMessage() and "'pattern'" in r.getMessage() for r in caplog.records)
