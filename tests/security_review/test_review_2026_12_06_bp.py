"""Review bp of reviews bj, bn and bm: grants preloading, admin lookups, linear-time schema patterns.

Findings:
- A remote MCP server's ``outputSchema`` patterns were still matched with Python's backtracking ``re``: the
  ``mcp`` SDK's client checks every structured result against the listed output schema with jsonschema, so
  a server listing ``^(a+)+$`` and answering thirty ``a`` and a ``!`` held the worker (and its GIL) for
  minutes; ``anyio.fail_after`` cannot interrupt it. The session now checks with ``linear_validator``.

Checked and holds:
- ``_names_principal`` selects exactly what ``_grants_filter`` does for every grant shape the table allows
  (its check constraint: exactly one of user, group, tenant, agent; agent_tenant only with an agent): the
  Python reads ``A or B or (C and D)`` as the SQL does, NULL columns compare unequal in both, an empty
  tenant selects no tenant grant nor a tenant-bound agent grant in either, a user without groups selects
  none by group, a deleted group's grants cascade away (and its memberships stamp a new governance version).
- ``_grants_key``: ``user_id if user else None`` is ``user_id`` (facts are ``None`` exactly when the id is);
  a principal's tenant, user and agent are its whole key, the groups come from the same stamp's user facts.
- A CallerView lives in one serializer context (``caller_view_of``), a filter's method or one MCP status /
  wait answer: none is kept on a class, a session or a module, so its held stamp ends with the response. A
  stale stamp it passes to ``governance_scope`` replaces the process cache with an empty one (fresh loads),
  never answers another request from old entries; writes checked by stamp still decide again.
- Rust's ``$`` is end of text only (as ECMA-262): ``^a$`` refuses ``"a\\n"`` where Python's ``re`` accepted it;
  compiled patterns are bounded (10 MiB: ``\\w{5000}`` is refused in under 0.1 s, not built).
- Approval-rule value checks (``toolhub.references``) and tool argument schemas use ``linear_validator``;
  pydantic-typed tools' ``Field(pattern=)`` are written by developers (pydantic's default engine is Rust's).

Left open: ``\\d`` and ``\\w`` are Unicode-aware in Rust (and were in Python's ``re``), ASCII in ECMA-262:
``^\\d+$`` admits ``"١٢٣"``; not narrowed here.
"""

import time
from typing import Any

import pytest

from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub.mcp_client.definitions import definition_hash
from toolhub.mcp_client.remote import RemoteServerError, remote_call, remote_tools

pytestmark = pytest.mark.django_db

_CATASTROPHIC = {
    "name": "grade",
    "description": "Grades a customer.",
    "inputSchema": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
    "outputSchema": {
        "type": "object",
        "properties": {"customer": {"type": "string", "pattern": "^(a+)+$"}, "tier": {"type": "string"}},
    },
}


def _call(url: str, arguments: dict[str, Any]) -> Any:
    listed = next(tool for tool in remote_tools(url=url, name="crm", headers={}, timeout=30) if tool["name"] == "grade")
    return remote_call(
        url=url,
        name="crm",
        headers={},
        timeout=30,
        remote_name="grade",
        arguments=arguments,
        meta={},
        accepted_hash=definition_hash(listed),
    )


def test_a_remote_output_schemas_pattern_is_matched_in_linear_time() -> None:
    """Found: the SDK matched a listed outputSchema's ``^(a+)+$`` with backtracking ``re`` (about 10 s here).

    Expect: the structured result is refused at once, as not matching (linear time), and one that matches passes.
    """
    fake = FakeCrm()
    fake.extra_tools = [_CATASTROPHIC]
    with serving(fake) as url:
        assert _call(url, {"customer_id": "aaaa"}).structured == {"customer": "aaaa", "tier": "gold"}
        started = time.monotonic()
        with pytest.raises(RemoteServerError, match="Invalid structured content"):
            _call(url, {"customer_id": "a" * 28 + "!"})
        assert time.monotonic() - started < 3


def test_a_remote_output_schema_with_a_pattern_the_linear_engine_cannot_run_refuses_the_result() -> None:
    """Found: a look-ahead in an outputSchema ran on backtracking ``re`` (no linear engine involved).

    Expect: the result is refused as not matching, never matched by a backtracking fallback.
    """
    fake = FakeCrm()
    fake.extra_tools = [
        {**_CATASTROPHIC, "outputSchema": {"type": "object", "properties": {"customer": {"pattern": "^(?=a)a+$"}}}}
    ]
    with serving(fake) as url:
        with pytest.raises(RemoteServerError, match="Invalid structured content"):
            _call(url, {"customer_id": "aaaa"})
