"""``manage.py toolhub_roles``: create or update the Django groups behind toolhub's roles.

Roles grant what a person may do; the tenant boundary (``toolhub.tenancy``) still decides where:
an operator decides and operates only in the tenants they are a member of. Members of these groups
need staff status to log into the admin. Permissions are named as ``app_label.codename`` strings so
that the core imports no other app; running the command again sets each group to exactly this list.
Like the admin's change of a group, each group added or changed is a ``governance.added`` / ``changed`` event
in the chains of the tenants whose people hold the role (the platform's when nobody does): a permission an
administrator had added and the command removed is seen there.
"""

from typing import Any

from django.contrib.auth.models import Group, Permission
from django.core.management.base import CommandError
from django.db import transaction

from toolhub.governance_trail import (
    GROUP_TENANTS,
    command_actor,
    governance_append,
    governance_recorded,
    governance_tenants,
)
from toolhub.operator_command import OperatorCommand

#: What auditors read, and operators and developers too: every record of the console, changed by nobody.
READ_ONLY: tuple[str, ...] = (
    "toolhub.view_tenant",
    "toolhub.view_tenantmembership",
    "toolhub.view_tooldefinition",
    "toolhub.view_toolgroup",
    "toolhub.view_grant",
    "toolhub.view_toolcall",
    "toolhub.view_toolcallartifact",
    "toolhub.view_auditevent",
    "approvals.view_approvalrule",
    "approvals.view_approvalrequest",
    "approvals.view_approvaldecision",
    "approvals.view_webhookdelivery",
    "agents_app.view_agent",
    "agents_app.view_agentrun",
    "sagas.view_saga",
    "sagas.view_compensation",
    "sagas.view_rollback",
    "sagas.view_compensationattempt",
)

#: Role name -> the permissions its group holds, exactly.
ROLES: dict[str, tuple[str, ...]] = {
    "auditors": READ_ONLY,
    "operators": (
        *READ_ONLY,
        "approvals.decide_approvalrequest",
        "sagas.operate_saga",
        # Supplying an external tool's result for a call of the operator's tenant.
        "toolhub.change_toolcall",
    ),
    "developers": (
        *READ_ONLY,
        "agents_app.add_agent",
        "agents_app.change_agent",
        "toolhub.change_tooldefinition",
        "toolhub.add_toolgroup",
        "toolhub.change_toolgroup",
        "toolhub.add_grant",
        "toolhub.change_grant",
        "toolhub.delete_grant",
        "approvals.add_approvalrule",
        "approvals.change_approvalrule",
        "approvals.delete_approvalrule",
    ),
}


def roles_sync(roles: dict[str, tuple[str, ...]] = ROLES, *, actor: str = "") -> dict[str, int]:
    """Create or update each role's group with exactly its permissions; return how many each holds.

    Each group added or changed is recorded as the admin records it, by ``actor`` (default: the OS user).

    Raises ``CommandError`` naming every permission that does not exist (an app not installed or
    migrated, a renamed model), and then changes nothing.
    """
    resolved: dict[str, list[Permission]] = {}
    missing: list[str] = []
    for role, names in roles.items():
        resolved[role] = []
        for name in names:
            app_label, _, codename = name.partition(".")
            permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if permission is None:
                missing.append(name)
            else:
                resolved[role].append(permission)
    if missing:
        raise CommandError(
            f"Unknown permission(s): {', '.join(sorted(set(missing)))}. Run `manage.py migrate` first, "
            "or correct the names in toolhub/management/commands/toolhub_roles.py."
        )
    actor = actor or command_actor()
    with transaction.atomic():
        for role, permissions in resolved.items():
            group, created = Group.objects.get_or_create(name=role)
            tenants = governance_tenants(group, fields=(), lookups=GROUP_TENANTS)
            before = None if created else governance_recorded(group, tenants=tenants)
            group.permissions.set(permissions)
            governance_append(group, "added" if created else "changed", actor=actor, tenants=tenants, before=before)
    return {role: len(permissions) for role, permissions in resolved.items()}


class Command(OperatorCommand):
    help = "Create or update the groups operators, auditors and developers with their permissions (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        for role, count in roles_sync().items():
            if options["verbosity"] >= 1:
                self.stdout.write(f"{role}: {count} permission(s)")
