"""The tables of accounts and their rights, named from the models (``AUTH_USER_MODEL``), never spelled out.

A project with its own user model (``AUTH_USER_MODEL = "accounts.User"``) keeps its users in that model's table
(``accounts_user``) and their groups and permissions in its many-to-many tables (``accounts_user_groups``,
``accounts_user_user_permissions``): ``auth_user`` does not exist there. Whatever watches those tables (the
governance stamp's triggers, ``toolhub.governance``) reads their names here, from ``_meta``; the system check
``toolhub.E008`` refuses a user model toolhub cannot watch.
"""

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import models

__all__ = ["account_governance_tables", "account_model_problems"]

#: The flags authorization reads of a user (``toolhub.authorization._user_facts``): each must be a column.
RIGHTS_FLAGS = ("is_superuser", "is_active")
#: The many-to-many fields authorization reads of a user: groups (grants) and direct permissions (capabilities).
RIGHTS_RELATIONS = ("groups", "user_permissions")

_ALL = "INSERT OR UPDATE OR DELETE"


def _user_model(user_model: type[models.Model] | None) -> type[models.Model]:
    if user_model is not None:
        return user_model
    from django.contrib.auth import get_user_model

    return get_user_model()


def _flag_column(meta: Any, name: str) -> str | None:
    """The column of the user model's flag ``name``, or ``None`` when it has no such column."""
    try:
        field: Any = meta.get_field(name)
    except FieldDoesNotExist:
        return None
    return field.column if field.concrete and not field.many_to_many else None


def _through_table(meta: Any, name: str) -> str | None:
    """The table of the user model's many-to-many ``name``, or ``None`` when it has no such relation."""
    try:
        field: Any = meta.get_field(name)
    except FieldDoesNotExist:
        return None
    return field.remote_field.through._meta.db_table if field.many_to_many else None


def account_model_problems(user_model: type[models.Model] | None = None) -> list[str]:
    """What the user model lacks for toolhub to watch its rights (empty when it can): one line each."""
    meta = _user_model(user_model)._meta
    return [f"no {name} column" for name in RIGHTS_FLAGS if _flag_column(meta, name) is None] + [
        f"no {name} many-to-many field" for name in RIGHTS_RELATIONS if _through_table(meta, name) is None
    ]


def account_governance_tables(user_model: type[models.Model] | None = None) -> dict[str, str]:
    """The account tables whose changes decide who may call what, with the statement events that do.

    The user's table (rows coming and going, the superuser and active flags: a login's ``last_login`` is not a
    change of rights), its groups' and permissions' through tables, ``Group`` and its permissions' through table
    (capabilities are permissions, ``toolhub.disclosure.capabilities``). A user model lacking a part (``E008``
    reports it) leaves that part out rather than naming a table that is not there.
    """
    from django.contrib.auth.models import Group

    meta = _user_model(user_model)._meta
    flags = [column for column in (_flag_column(meta, name) for name in RIGHTS_FLAGS) if column]
    tables = {meta.db_table: f"INSERT OR DELETE OR UPDATE OF {', '.join(flags)}" if flags else "INSERT OR DELETE"}
    for table in (_through_table(meta, name) for name in RIGHTS_RELATIONS):
        if table:
            tables[table] = _ALL
    tables[Group._meta.db_table] = _ALL
    tables[Group.permissions.through._meta.db_table] = _ALL
    return tables
