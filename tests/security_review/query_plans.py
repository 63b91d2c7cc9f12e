"""Production-volume tables made in SQL and the PostgreSQL plans of what a sweep sends (reviews d, n)."""

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext

#: The tables the backlogs fill: a sweep's statement must never read one of them whole.
BIG_TABLES = (
    "toolhub_toolcall",
    "agents_app_agentrun",
    "sagas_saga",
    "sagas_rollback",
    "sagas_compensation",
    "approvals_approvalrequest",
    "approvals_webhookdelivery",
)


def clone(model: type[Model], template: Model, rows: int, **columns: str) -> None:
    """``rows`` copies of ``template`` made in SQL; ``columns`` are SQL expressions over ``g`` (1..rows)."""
    table = model._meta.db_table
    names = [f.column for f in model._meta.concrete_fields if f.column in columns or not f.primary_key]
    values = [columns.get(name, f't."{name}"').replace("%", "%%") for name in names]
    quoted = ", ".join(f'"{name}"' for name in names)
    with connection.cursor() as cursor:
        cursor.execute(
            f'INSERT INTO "{table}" ({quoted}) SELECT {", ".join(values)} FROM "{table}" t, '
            f"generate_series(1, %s) g WHERE t.{model._meta.pk.column} = %s",
            [rows, template.pk],
        )


def uuid_of(prefix: str, g: str = "g") -> str:
    """The same uuid for the same ``g`` and prefix: a request, a compensation name the call cloned with its ``g``."""
    return f"md5('{prefix}' || ({g}))::uuid"


def ago(minutes: str) -> str:
    """That many minutes before the transaction began, in SQL."""
    return f"now() - ({minutes}) * interval '1 minute'"


def analyze() -> None:
    """Statistics as the autovacuum daemon would have them after the backlog was written."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def explained(sweep: Callable[[], Any]) -> list[tuple[str, str]]:
    """The statements ``sweep`` sent (reads and writes, not its savepoints), each with its EXPLAIN ANALYZE."""
    plans = []
    with connection.cursor() as cursor:
        for sql in _statements(sweep, ("SELECT", "UPDATE", "WITH")):
            if "%s" in sql:
                continue
            cursor.execute("EXPLAIN ANALYZE " + sql)
            plans.append((sql, "\n".join(row[0] for row in cursor.fetchall())))
    assert plans, sweep
    return plans


def _statements(run: Callable[[], Any], kinds: tuple[str, ...]) -> list[str]:
    """The SQL of the statements ``run`` sent that start with one of ``kinds`` (not its savepoints)."""
    with CaptureQueriesContext(connection) as queries:
        run()
    return [query["sql"] for query in queries.captured_queries if query["sql"].startswith(kinds)]


def seq_scans(plan: str) -> list[str]:
    """The plan's nodes reading a big table whole."""
    return [line.strip() for line in plan.splitlines() if any(f"Seq Scan on {table}" in line for table in BIG_TABLES)]


def max_loops(plan: str) -> int:
    """How often the plan's most repeated node ran (a subquery per row shows here)."""
    return max(int(loops) for loops in re.findall(r"loops=(\d+)", plan))


def json_plans(run: Callable[[], Any]) -> list[tuple[str, dict[str, Any]]]:
    """The statements ``run`` sent (reads only), each with its ``EXPLAIN (ANALYZE, FORMAT JSON)`` root node.

    Statistics stay as they were (no ANALYZE): the rows a test just wrote are newer than them, as in CI.
    """
    plans = []
    with connection.cursor() as cursor:
        for sql in _statements(run, ("SELECT", "WITH")):
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
            (plan,) = cursor.fetchone()
            plans.append((sql, (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]))
    assert plans, run
    return plans


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a JSON plan, subplans included."""
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def rows_read(plan: dict[str, Any], table: str) -> int:
    """The rows the plan's scans of ``table`` fetched, kept or filtered out, over all their loops."""
    return sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in nodes(plan)
        if node.get("Relation Name") == table
    )
