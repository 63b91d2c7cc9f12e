"""Review of 2026-12-06 (br): the caching behind authorization (``grants_preload``, ``governance_cached_many``, the
``CallerView`` reading all of a reader's tenants under one governance read).

Findings:
- ``CallerView._authorizing`` kept the stamp its first scope read and passed it to each later scope as one "just
  read" (``governance_scope(stamp=)``): once any other request of the process had read a newer stamp, the view's
  next authorization put the older stamp back as the process's current cache, empty, and reloaded everything into
  it (14 queries for one more tenant, the preload lost) from the newer state under the older label; and every
  checked write of the process (``checked_by_write``, a claim's ``governance_stamp(assume_current=True)``) then
  checked a stamp already gone, failed and decided again. Now ``governance_scope(hold=)`` (``GovernanceHold``)
  keeps the snapshot the first scope read: the response decides under it and the process's cache is left alone.
- ``_Cache.get_many`` (``governance_cached_many``) tested a key in ``self.entries`` and then read it there again:
  another thread's lookup filling the cache to ``MAX_ENTRIES`` starts a new dict in between, and the read raised
  ``KeyError`` (a 500 for the agents list). It now reads one dict throughout, as ``get`` does.

Checked and found holding:
- a preload only fills the cache of the stamp it read: a grant revoked, a membership removed, a user deactivated,
  a user taken out of a group, a tool added to a denied group or a tenant deleted stamps a new version (triggers on
  every governance table, whatever writes it), and the next authorization in the process (or any other) reloads
  (test below, through the preload of several tenants);
- cache keys: a principal's grants are keyed by tenant, user and agent name (the user's groups are the same
  stamp's ``("user", id)`` facts), and a preload hands each key only the rows its own filter selects
  (``_names_principal`` mirrors ``_grants_filter``; review bj's equivalence tests, and the one below with
  principals without a user, a deleted user, no tenant and agents bound to other tenants): no tenant's or user's
  grants reach another's key;
- execution re-checks under its own scope (``refusal_at_execution``): a preload fills the process cache only with
  what the principal's own lookup would load under the same stamp, so a worker or the pipeline using it decides
  as it would alone, and a checked write still fails when the stamp moved;
- there is no separate cache backend: the cache is per process behind the stamp row; without the row (or before
  the migration) nothing is cached and every lookup reads the database; with the database down nothing is decided.
"""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

import tests.disclosure.conftest as disclosure_fixtures
from toolhub import governance
from toolhub.authorization import CallPrincipal, authorize_tools, grants_preload
from toolhub.caller_view import CallerView
from toolhub.governance import governance_cached_many, governance_scope, governance_stamp
from toolhub.models import Grant, GrantEffect, Tenant, TenantMembership, ToolGroup

pytestmark = pytest.mark.django_db

disclosure_tools = disclosure_fixtures.disclosure_tools  # the sample tools (``clock`` among them), registered

TENANTS = ("br1", "br2", "br3")


def _reader() -> User:
    """A member of three tenants, each allowing ``clock``."""
    user = User.objects.create_user("br-reader", "br@example.com", "pw")
    for slug in TENANTS:
        tenant = Tenant.objects.create(slug=slug, name=slug.upper())
        TenantMembership.objects.create(user=user, tenant=tenant)
        Grant.objects.create(effect=GrantEffect.ALLOW, tool_name="clock", tenant=tenant)
    return User.objects.get(pk=user.pk)


def _principal(user: User, tenant: str) -> CallPrincipal:
    return CallPrincipal(user_id=user.pk, username=user.get_username(), tenant=tenant)


def test_a_reply_keeps_its_governance_read_without_putting_an_older_stamp_back(settings: Any) -> None:
    """Found: a view's later authorization passed the stamp its first one read as just read: after another request
    of the process read a newer stamp, it made the older one the process's current again (an empty cache, reloaded
    from the newer state: 14 queries for one more tenant), so the process's checked writes checked a stamp already
    gone. Expect: the reply decides under the snapshot it read first (its preload kept: no query), and the process
    keeps the newest stamp it read."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    reader = _reader()
    view = CallerView(reader)
    assert "clock" in view._visible_in("br1")  # the reply's first read: all three tenants' grants preloaded
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="get_weather", tenant=Tenant.objects.get(slug="br3"))
    with governance_scope() as newest:  # another request of the process, after the change
        authorize_tools(["clock"], _principal(reader, "br3"))

    with CaptureQueriesContext(connection) as queries:
        visible = view._visible_in("br2")

    assert "clock" in visible
    assert len(queries) == 0, [query["sql"][:80] for query in queries.captured_queries]
    assert governance_stamp(assume_current=True) == newest


def test_a_lookup_of_many_keys_survives_another_thread_starting_the_cache_afresh() -> None:
    """Found: ``governance_cached_many`` tested a key in the cache's dict, then read it from the dict again; another
    thread's lookup that filled the cache to ``MAX_ENTRIES`` in between starts a new dict, and the read raised
    ``KeyError``. Expect: the keys found are returned, the others loaded."""
    with governance_scope() as stamp:
        assert stamp is not None
        cache = governance._scope.get()
        assert cache is not None
        cache.entries[("br", 1)] = "one"

        class StartedAfresh(dict[Any, Any]):
            """Another thread's ``_keep`` replaces the dict right after this one answers a test."""

            def __contains__(self, key: object) -> bool:
                present = super().__contains__(key)
                cache.entries = {}
                return present

        cache.entries = StartedAfresh(cache.entries)
        found = governance_cached_many([("br", 1), ("br", 2)], lambda missing: dict.fromkeys(missing, "loaded"))

    assert found == {("br", 1): "one", ("br", 2): "loaded"}


def _revoke_grant(reader: User) -> None:
    Grant.objects.filter(tenant__slug="br2", tool_name="clock").delete()


def _leave_tenant(reader: User) -> None:
    TenantMembership.objects.filter(user=reader, tenant__slug="br2").delete()


def _deactivate(reader: User) -> None:
    User.objects.filter(pk=reader.pk).update(is_active=False)


def _join_denied_group(reader: User) -> None:
    group = Group.objects.create(name="br-denied")
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="clock", group=group)
    reader.groups.add(group)


def _tool_into_denied_group(reader: User) -> None:
    group = ToolGroup.objects.create(name="br-denied-tools", extra_tools=["clock"])
    Grant.objects.create(effect=GrantEffect.DENY, tool_group=group, tenant=Tenant.objects.get(slug="br2"))


def _delete_tenant(reader: User) -> None:
    Tenant.objects.get(slug="br2").delete()


@pytest.mark.parametrize(
    "change",
    [_revoke_grant, _leave_tenant, _deactivate, _join_denied_group, _tool_into_denied_group, _delete_tenant],
)
def test_a_preload_never_outlives_a_governance_change(change: Callable[[User], None], settings: Any) -> None:
    """Found: (holds) the preload of several tenants' grants fills the process cache under the stamp it read.
    Expect: after a revocation, a membership removed, a deactivation, a group joined, a tool moved into a denied
    group or the tenant deleted, the next authorization in the process refuses ``clock`` in br2."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    reader = _reader()
    with governance_scope():
        grants_preload(_principal(reader, slug) for slug in TENANTS)
        assert authorize_tools(["clock"], _principal(reader, "br2"))["clock"] is None

    change(reader)

    assert authorize_tools(["clock"], _principal(reader, "br2"))["clock"] is not None


def test_a_preload_hands_each_principal_exactly_its_own_grants() -> None:
    """Found: (holds) beyond review bj's cases: principals without a user, a deleted user, no tenant, agents
    bound to another tenant, every kind of grant target crossed with both effects. Expect: after one preload of
    all of them, every principal's verdicts on every tool are those it gets alone."""
    reader = _reader()
    gone = User.objects.create_user("br-gone")
    team = Group.objects.create(name="br-team")
    reader.groups.add(team)
    tenants = {slug: Tenant.objects.get(slug=slug) for slug in TENANTS}
    tools = ["clock", "get_weather", "send_email", "refund_payment"]
    targets: list[dict[str, Any]] = [
        {"tenant": tenants["br1"]},
        {"tenant": tenants["br2"]},
        {"user": reader},
        {"user": gone},
        {"group": team},
        {"agent_name": "helper"},
        {"agent_name": "helper", "agent_tenant": tenants["br1"]},
        {"agent_name": "helper", "agent_tenant": tenants["br3"]},
        {"agent_name": "other"},
    ]
    for number, target in enumerate(targets):
        for offset, effect in enumerate((GrantEffect.ALLOW, GrantEffect.DENY)):
            Grant.objects.create(effect=effect, tool_name=tools[(number + 2 * offset) % len(tools)], **target)
    gone_id = gone.pk
    gone.delete()
    principals = [
        CallPrincipal(user_id=user_id, username="", tenant=slug, agent_name=agent, agent_tools=agent_tools)
        for user_id in (reader.pk, gone_id, None)
        for slug in (*TENANTS, "")
        for agent, agent_tools in (("", None), ("helper", frozenset(tools[:2])), ("other", frozenset()))
    ]
    alone = {principal: authorize_tools(tools, principal) for principal in principals}
    Grant.objects.create(effect=GrantEffect.DENY, tool_name="br-none", agent_name="br-none").delete()  # cold cache

    with governance_scope():
        grants_preload(principals)
        together = {principal: authorize_tools(tools, principal) for principal in principals}

    assert together == alone
    assert len({tuple(sorted(verdicts.items(), key=lambda item: item[0])) for verdicts in alone.values()}) > 5
