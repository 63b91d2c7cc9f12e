"""``manage.py toolhub_roles``: the groups operators, auditors and developers, created or updated idempotently."""

from io import StringIO

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import CommandError, call_command

from toolhub.management.commands import toolhub_roles
from toolhub.management.commands.toolhub_roles import ROLES, roles_sync

pytestmark = pytest.mark.django_db


def permissions_of(name: str) -> set[str]:
    group = Group.objects.get(name=name)
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}


def test_the_command_creates_the_three_roles_with_their_permissions() -> None:
    out = StringIO()
    call_command("toolhub_roles", stdout=out)

    assert set(Group.objects.values_list("name", flat=True)) >= {"operators", "auditors", "developers"}
    for role, names in ROLES.items():
        assert permissions_of(role) == set(names)
        assert f"{role}: {len(set(names))} permission(s)" in out.getvalue()
    # auditors only read; operators decide and operate sagas; developers manage agents, catalogue and rules
    assert all(name.split(".")[1].startswith("view_") for name in permissions_of("auditors"))
    assert {"approvals.decide_approvalrequest", "sagas.operate_saga"} <= permissions_of("operators")
    assert not {"approvals.decide_approvalrequest", "sagas.operate_saga"} & permissions_of("developers")
    assert {"agents_app.add_agent", "agents_app.change_agent", "agents_app.view_agent"} <= permissions_of("developers")
    assert {"toolhub.change_tooldefinition", "toolhub.change_toolgroup", "toolhub.add_grant"} <= permissions_of(
        "developers"
    )
    assert {"approvals.add_approvalrule", "approvals.change_approvalrule"} <= permissions_of("developers")
    # no role crosses the tenant boundary: that permission is given to a platform team by hand
    assert not any("toolhub.cross_tenant" in permissions_of(role) for role in ROLES)


def test_running_it_again_converges_on_the_same_groups() -> None:
    call_command("toolhub_roles", stdout=StringIO())
    auditors = Group.objects.get(name="auditors")
    auditors.permissions.add(
        Permission.objects.get(content_type__app_label="approvals", codename="decide_approvalrequest")
    )
    groups_before = Group.objects.count()

    call_command("toolhub_roles", stdout=StringIO())
    call_command("toolhub_roles", stdout=StringIO())

    assert Group.objects.count() == groups_before
    assert permissions_of("auditors") == set(ROLES["auditors"])


def test_an_unknown_permission_is_named_and_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        toolhub_roles, "ROLES", {**ROLES, "auditors": (*ROLES["auditors"], "approvals.view_nothing", "nope.view_x")}
    )

    with pytest.raises(CommandError, match=r"approvals\.view_nothing, nope\.view_x.*migrate"):
        roles_sync(toolhub_roles.ROLES)

    assert not Group.objects.filter(name__in=list(ROLES)).exists()
