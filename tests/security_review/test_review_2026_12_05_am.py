"""Review of 2026-12-05 (am): every cache, as a source of cross-tenant leaks and stale authorization.

Each test fails on the reviewed code (main at 61f7d9c) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The governance triggers fired on INSERT, UPDATE and DELETE only. ``TRUNCATE toolhub_grant`` (an operator
   revoking every grant at once from psql) or a TRUNCATE of memberships stamped nothing, so every process went on
   authorizing from the grants and standings it had cached, with no time to live, in every tenant. Fixed in
   ``toolhub.governance.governance_triggers_install``: on PostgreSQL a watched DELETE includes TRUNCATE.
2. ``toolhub.tools.jsonschema_args`` cached JSON Schema validators by ``id(schema)`` in a dict nothing emptied, and
   each validator holds its schema: every remote MCP tool, rebuilt on each governance change, left one more schema
   and validator per change in every process. Fixed: the validator is kept per tool, weakly, as long as the tool.

Checked and found holding (no test here):

- ``governance_cached`` keys and what their loaders read: ``("user", id)`` (active and superuser bits, groups,
  capability permissions, memberships), ``("grants", tenant, user id, agent)`` (user, group, tenant and agent grants,
  an agent grant bound to a tenant only there), the catalogue, tool groups and capabilities, activation rules and
  roles (``disclosure.groups``/``roles``), remote MCP tools (global; a tenant's missing credential is judged per call
  outside the cache), approval rules (global; a tenant's rule matched against the call's tenant), the MCP header
  tools, ``approval_decider``. Every table they read is watched (``auth_user`` for the two bits that matter; names
  are read from the request's user); none of them depends on a tenant, user, agent, run or setting its key omits.
- ``approvals.deciders.decider_as_now``: keyed by user id, loaded under the stamp read after the request's lock, its
  permissions and tenant scope memoized before it is handed out; ``approval_may_decide`` only reads it (groups are
  queried, ``has_perm`` reads the memo), the decision's names and rows use the request's own user object.
- Search: ``principal_index`` is keyed by (provider, tenant, user id, agent, the usable names); its documents are
  a function of those names only, so a warm index of one tenant never answers another; the PostgreSQL provider's
  rows are shared by content hash and searched only under the key built from the principal's own documents; the
  embedding cache, stem tables and query caches are keyed by text alone and hold immutable values.
- MCP: header schemas are worked out per HTTP request for the token's user and tenant and travel in a context
  variable reset after the request; ``_declaring`` holds code tools only (frozen registry).
- Shared objects: ``tool_definitions()`` rows and cached approval rules are only read; exports deep-copy profile
  schemas; a narrowed by-category facade is keyed by its categories alone and shared (it depends on nothing else);
  the LangChain adapter's strict conversion copies the registry's schema before changing it.
- Context variables (governance scope, batched outcomes, inline worker, secrets scrubber, after-task hooks, MCP
  header schemas) are all reset in ``finally``; no tool runs inside a governance scope.
- No Django cache, template fragment cache or HTTP cache holds tenant data (the cache holds throttle counters keyed
  by user id and the per-tenant audit-verification throttle).

Found, not fixed: ``PostgresProvider.prune(unused_for=...)`` (README: 7 days) deletes a catalogue's rows by its last
*build*, and a process keeps its built ``PostgresIndex`` until the next governance change; after a quiet week every
cached index searches nothing ("No tool matched") until some change. Searching never refreshes ``built_at``
(``tests/search/test_postgres.py`` pins "pruned: finds nothing"); an availability problem, not a leak.
"""

from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection

from tests.security_review.pg_races import dsn
from toolhub.authorization import CallPrincipal, authorization_denial
from toolhub.models import Grant, Tenant, TenantMembership


def _other_session_runs(sql: str) -> None:
    """``sql`` committed by another database session (an operator's psql, another process)."""
    with psycopg.connect(**dsn(), autocommit=True) as other:
        other.execute(sql)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_truncating_a_governance_table_is_seen_by_the_next_call(
    tenant: Tenant, other_tenant: Tenant, alice: User, settings: Any
) -> None:
    """Found: the governance triggers fire on INSERT, UPDATE and DELETE only; ``TRUNCATE toolhub_grant`` (an
    operator revoking every grant at once, from psql) stamped nothing, so every process kept answering from the
    grants it had cached, with no time to live, until some unrelated change.
    Expect: a TRUNCATE of a watched table stamps a new governance version like any other change."""
    from toolhub.governance import governance_triggers_install

    assert connection.vendor == "postgresql"
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    governance_triggers_install()  # the transactional tests' flush empties the stamp row; migrate puts it back
    bob = User.objects.create_user("bob-am")
    TenantMembership.objects.create(user=bob, tenant=other_tenant)
    Grant.objects.create(tool_name="record_effect", tenant=tenant)
    Grant.objects.create(tool_name="record_effect", tenant=other_tenant)
    alice_in_acme = CallPrincipal(user_id=alice.pk, username="alice", tenant="acme")
    bob_in_globex = CallPrincipal(user_id=bob.pk, username="bob-am", tenant="globex")
    assert authorization_denial("record_effect", alice_in_acme) is None  # warm: both principals' grants cached
    assert authorization_denial("record_effect", bob_in_globex) is None

    _other_session_runs("TRUNCATE toolhub_grant")

    assert authorization_denial("record_effect", alice_in_acme) is not None
    assert authorization_denial("record_effect", bob_in_globex) is not None
    assert Grant.objects.count() == 0


class _Node(dict[str, Any]):
    """A schema node that can be watched with a weak reference (a plain dict cannot)."""


def test_a_rebuilt_json_schema_tool_leaves_no_validator_or_schema_behind() -> None:
    """Found: ``toolhub.tools.jsonschema_args`` cached each JSON Schema tool's validator by ``id(schema)`` in a
    process-wide dict that nothing ever emptied. The validator holds its schema, so every schema ever validated
    stayed alive: a remote MCP tool is built again (``mcp_client.provider._build``) on every governance change, so
    each worker kept one more copy of each remote schema and its validator per grant, membership or rule changed.
    Expect: a tool's validator lives as long as the tool; a rebuilt tool's old schema is freed."""
    import gc
    import weakref

    from toolhub.tools.definition import Tool

    watched = []
    for note in ("first", "second", "third"):  # the same remote tool, built again after each governance change
        schema = {"type": "object", "properties": _Node(note={"type": "string"}), "required": ["note"]}
        tool = Tool.create("am_remote__note", "A remote tool.", schema, lambda arguments, ctx: None, allow_any=True)
        assert tool.validate_arguments({"note": note}) == {"note": note}
        assert tool.validate_arguments({"note": note}) == {"note": note}  # its validator, built once, serves again
        assert isinstance(tool.json_schema["properties"], _Node)
        watched.append(weakref.ref(tool.json_schema["properties"]))
        del tool
    gc.collect()

    assert [ref() is None for ref in watched] == [True, True, True]
