"""System checks that read the database: saved rows and roles the code or the settings no longer allow.

Run with ``manage.py check --database default`` and by ``migrate`` (``toolhub.W006``-``W009``, listed in
``toolhub.checks``).
"""

from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Tags, Warning, register
from django.db import DatabaseError, transaction
from django.db.models import Model, Q

from toolhub.credential_env import credential_env_problem, credential_env_validator
from toolhub.references import reference_warnings, saved_rows


@register("toolhub", Tags.database)
def check_governance_references(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Grants and groups saved before a tool left the code still name it: say so (``toolhub.references``).

    Read from the database, so only with ``--database`` (``manage.py check --database default``, ``migrate``).
    """
    if not databases:
        return []
    from toolhub.models import Grant, ToolGroup

    related = ("tool_group", "user", "group", "tenant", "agent_tenant")
    # By key: a Grant has no ordering, and the check's message (which rows it names, past the bound) must not
    # change from one run to the next.
    rows = saved_rows(
        lambda: [*Grant.objects.select_related(*related).order_by("pk"), *ToolGroup.objects.order_by("pk")]
    )
    return reference_warnings(
        ((row, row.reference_problems()) for row in rows),
        check_id="toolhub.W006",
        hint="Fix or delete the row in the admin (Grants, Tool groups); it was saved before the code changed.",
    )


def credential_models() -> list[tuple[type[Model], list[str]]]:
    """The models with a credential reference, and those fields: every field validated by ``credential_env``."""
    found = []
    for model in apps.get_models():
        if model._meta.proxy:
            continue  # its concrete model's rows, reported once
        fields = [field.name for field in model._meta.concrete_fields if credential_env_validator in field.validators]
        if fields:
            found.append((model, fields))
    return found


@register("toolhub", Tags.database)
def check_credential_references(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Rows saved before their variable was refused (a tool's ``Secret`` reads it since, a release refuses it).

    Such a row is not read (``credential_from_env``): its runs or calls fail "not configured", the reason only in
    the log. Read from the database, so only with ``--database`` (``manage.py check --database default``, ``migrate``):
    each variable named is judged once, and only the rows naming a refused one are read.
    """
    if not databases:
        return []
    rows = [found for model, fields in credential_models() for found in _refused_credential_rows(model, fields)]
    return reference_warnings(
        rows,
        check_id="toolhub.W007",
        hint='Its runs or calls fail "not configured" until then: set the endpoint\'s key in a variable of its own '
        "on the web and worker processes and name it on the row's admin page (Model providers, Remote MCP "
        "credentials).",
    )


def _refused_credential_rows(model: type[Model], fields: list[str]) -> list[tuple[Model, dict[str, str]]]:
    """``model``'s rows naming a refused variable in one of ``fields``, each with why (field: problem), by key."""
    refused: dict[str, dict[str, str]] = {}
    for field in fields:
        named = saved_rows(
            lambda field=field: model._default_manager.order_by().values_list(field, flat=True).distinct()
        )
        problems = {value: problem for value in named if value and (problem := credential_env_problem(value))}
        if problems:
            refused[field] = problems
    if not refused:
        return []
    naming = Q.create([(f"{field}__in", list(problems)) for field, problems in refused.items()], connector=Q.OR)
    found = saved_rows(lambda: model._default_manager.select_related().filter(naming).order_by("pk"))
    return [
        (
            row,
            {
                field: f"{value!r}: {problems[value]}"
                for field, problems in refused.items()
                if (value := getattr(row, field)) in problems
            },
        )
        for row in found
    ]


@register("toolhub", Tags.database)
def check_app_roles(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Whether the PostgreSQL application roles are still append-only on the audit trail, and all marked (``dbroles``).

    Read from the database, so only with ``--database`` (``manage.py check --database default``, ``migrate``).
    """
    from toolhub.dbroles import db_app_roles_exposed, db_app_roles_unmarked

    found: list[CheckMessage] = []
    for alias in databases or []:
        try:
            with transaction.atomic(using=alias):  # a savepoint: a refused read leaves the connection usable
                exposed_roles, unmarked_roles = db_app_roles_exposed(alias), db_app_roles_unmarked(alias)
        except DatabaseError as error:
            # ``migrate`` runs the checks first: a role that may not read the catalogs must still migrate.
            refused = str(
                getattr(getattr(error.__cause__, "diag", None), "message_primary", "") or type(error).__name__
            )
            found.append(
                Warning(
                    f"The application roles of database {alias!r} could not be checked: {refused[:200]}.",
                    hint=f"Run `manage.py check --database {alias}` as the owner of the tables (or a role that may "
                    "read pg_default_acl and role comments) to check them.",
                    id="toolhub.W008",
                )
            )
            continue
        found += [
            Warning(
                f"{exposed} (database {alias!r}).",
                hint="A membership granted after toolhub_db_roles lends the role its rights, and migrate narrows only "
                "grants on the audit tables: revoke the membership (or the rights) as the owner.",
                id="toolhub.W008",
            )
            for exposed in exposed_roles
        ]
        found += [
            Warning(
                f"Role {role!r} was set up by an earlier toolhub_db_roles (database {alias!r}) and lacks its mark: "
                "migrate no longer grants it the rights on tables a migration adds or re-creates.",
                hint=f"Run `manage.py toolhub_db_roles --role {role}` as the owner once. If a DBA set this role up "
                "(not toolhub), add toolhub.W009 to SILENCED_SYSTEM_CHECKS.",
                id="toolhub.W009",
            )
            for role in unmarked_roles
        ]
    return found
