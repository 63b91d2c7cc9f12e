"""Review bp of reviews bj, bn and bm: grants preloading, admin lookups, linear-time schema patterns.

Findings:
- A remote MCP server's ``outputSchema`` patterns were still matched with Python's backtracking ``re``: the
  ``mcp`` SDK's client checks every structured result against the listed output schema with jsonschema, so
  a server listing ``^(a+)+$`` and answering thirty ``a`` and a ``!`` held the worker (and its GIL) for
  minutes; ``anyio.fail_after`` cannot interrupt it. The session now checks with ``linear_validator``.
- ``?q=`` on the runs list and the approval desk was Django's search, ``icontains`` over a run's ``input`` and a
  request's ``reason`` (a LIKE scan of every row of the viewer's tenants whatever the term, outside review bl's
  indexed-lookups rule: a minimum length would bound nothing, a term matching no row still reads them all). Both
  now match exactly on indexed columns (``ExactSearchMixin``): a run id, tenant, username or agent name; a
  request's call id or asker's username; sagas, compensations and webhook deliveries (``icontains`` over a key,
  a tool name, a message id) likewise match their indexed key or message id exactly.

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
- toolhub's MCP server evaluates no schema pattern in the SDK (its ``get_tool_input_schema`` feeds the
  ``Mcp-Param-*`` header check only); arguments go through the governed pipeline's checks above.

Left open: ``\\d`` and ``\\w`` are Unicode-aware in Rust (and were in Python's ``re``), ASCII in ECMA-262:
``^\\d+$`` admits ``"١٢٣"``; not narrowed here. Compiled patterns are bounded one by one (10 MiB), not per
schema: fifty distinct ``\\w{200}xN`` (600 bytes of a remote server's schema) made one ``linear_validator`` hold
583 MiB resident (6 s to build). Sizing them together as one alternation does not measure it (Rust shares
their structure: 200 compile in 0.1 s), and ``(?:p){16}`` per pattern refuses plain ``^\\w{20}$``; a count or
weight budget per schema needs its own design.
"""

import time
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents_app.models import AgentRun
from tests.mcpclient.fake_server import FakeCrm, serving
from tests.tenancy.conftest import make_user
from toolhub.mcp_client.definitions import definition_hash
from toolhub.mcp_client.remote import RemoteServerError, remote_call, remote_tools
from toolhub.models import Tenant

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

    Expect: the result is refused, never matched by a backtracking fallback (since review bq, the output schema is
    refused as one holding a pattern the linear engine cannot run, as an input schema would be).
    """
    fake = FakeCrm()
    fake.extra_tools = [
        {**_CATASTROPHIC, "outputSchema": {"type": "object", "properties": {"customer": {"pattern": "^(?=a)a+$"}}}}
    ]
    with serving(fake) as url:
        with pytest.raises(RemoteServerError, match="Invalid schema for tool grade: .* is not supported"):
            _call(url, {"customer_id": "aaaa"})


@pytest.fixture
def acme_staff(tenant: Tenant, roles: dict[str, Group]) -> Client:
    client = Client(raise_request_exception=False)
    groups = (roles["auditors"], roles["operators"])
    client.force_login(make_user("acme-staff", tenant=tenant, staff=True, groups=groups))
    return client


@pytest.mark.parametrize(
    "page",
    [
        "/admin/agents_app/agentrun/",
        "/admin/approvals/approvalrequest/",
        "/admin/sagas/saga/",
        "/admin/sagas/compensation/",
        "/admin/approvals/webhookdelivery/",
    ],
)
def test_admin_search_sends_no_like_scan(acme_staff: Client, page: str) -> None:
    """Found: ``?q=`` on the runs list and the desk was ``icontains`` over free text (a LIKE over every row).

    Expect: the page answers and no statement it sends compares with LIKE.
    """
    with CaptureQueriesContext(connection) as queries:
        assert acme_staff.get(f"{page}?q=refund").status_code == 200
    assert not [q["sql"] for q in queries if " LIKE " in q["sql"].upper()]


def test_admin_run_search_still_finds_a_run_by_id_user_and_agent(acme_staff: Client, tenant: Tenant) -> None:
    """Expect: the exact search finds a run by its id and its user's name, and nothing by a word of its input."""
    from agents_app.models import Agent

    user = make_user("runner", tenant=tenant)
    agent = Agent.objects.create(name="helper", tenant=tenant, system_prompt="Help.")
    run = AgentRun.objects.create(agent=agent, user=user, tenant="acme", input="please refund order 7")
    for term in (str(run.pk), "runner", "helper"):
        body = acme_staff.get(f"/admin/agents_app/agentrun/?q={term}").content.decode()
        assert str(run.pk) in body, term
    assert str(run.pk) not in acme_staff.get("/admin/agents_app/agentrun/?q=refund").content.decode()
