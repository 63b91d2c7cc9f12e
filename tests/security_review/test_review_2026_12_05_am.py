"""Review of 2026-12-05 (am): every cache, as a source of cross-tenant leaks and stale authorization.

Findings: (filled in below)
"""

from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection

from toolhub.authorization import CallPrincipal, authorization_denial
from toolhub.models import Grant, Tenant, TenantMembership


def _other_session_runs(sql: str) -> None:
    """``sql`` committed by another database session (an operator's psql, another process)."""
    settings_dict = connection.settings_dict
    with psycopg.connect(
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        host=settings_dict["HOST"],
        port=settings_dict["PORT"] or 5432,
        autocommit=True,
    ) as other:
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
