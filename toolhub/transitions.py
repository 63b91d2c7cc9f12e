"""Legal status moves, declared once per status field, and the guarded UPDATE every transition goes through.

A transition is a conditional ``UPDATE ... WHERE pk = ... AND status IN (...)``: of two racing writers
exactly one wins. Asking for a move the table does not declare is a programming error, refused before any
SQL runs, so a new code path cannot invent a transition nobody reviewed.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import models, transaction
from django.db.models.sql import UpdateQuery

from toolhub.exceptions import InvalidTransitionError

__all__ = ["TransitionTable", "guarded_update_sql", "guarded_update"]


class TransitionTable:
    """The moves one status field may make: ``{from_status: {to_status, ...}}``."""

    def __init__(self, name: str, moves: Mapping[str, Iterable[str]]) -> None:
        self.name = name
        self.moves = {str(source): frozenset(str(target) for target in targets) for source, targets in moves.items()}

    def allows(self, source: str, target: str) -> bool:
        return str(target) in self.moves.get(str(source), frozenset())

    def check(self, allowed_from: Iterable[str], to: str) -> list[str]:
        """The sources as a list; raise when any source -> ``to`` is not a declared move."""
        sources = [str(source) for source in allowed_from]
        illegal = [source for source in sources if not self.allows(source, to)]
        if illegal or not sources:
            raise InvalidTransitionError(
                f"{self.name}: moving from {', '.join(illegal) or 'nothing'} to {to} is not a declared transition; "
                f"declare it in the {self.name} transition table if it is meant to happen."
            )
        return sources


def guarded_update_sql(
    model: type[models.Model],
    pk: Any,
    *,
    table: TransitionTable,
    to: str,
    allowed_from: Iterable[str],
    values: Mapping[str, Any],
    field: str = "status",
) -> tuple[str, list[Any]]:
    """The SQL and parameters of the conditional UPDATE moving row ``pk`` to ``to`` (with ``values``)."""
    sources = table.check(allowed_from, to)
    query = model._default_manager.filter(pk=pk, **{f"{field}__in": sources}).query.chain(UpdateQuery)
    query.add_update_values({field: to, **values})
    sql, params = query.get_compiler(connection=transaction.get_connection()).as_sql()
    return sql, list(params)


def guarded_update(
    model: type[models.Model],
    pk: Any,
    *,
    table: TransitionTable,
    to: str,
    allowed_from: Iterable[str],
    values: Mapping[str, Any],
    field: str = "status",
) -> bool:
    """Apply the conditional UPDATE; return whether the row moved."""
    sql, params = guarded_update_sql(
        model, pk, table=table, to=to, allowed_from=allowed_from, values=values, field=field
    )
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount > 0
