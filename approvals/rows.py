"""The decision path's reads, with SQL written once per process instead of compiled by the ORM each time.

Every approval, rejection, expiry and escalation locks its request and reads it with its call, then (for a decision)
the request's earlier decisions and who asked for it (``ApprovalRequest.askers``, kept as ``ASKERS_READ``). A worker
about to run an approved call reads its request with the approvals it was released on and its askers in one statement
(``released_request``). Rows
become instances as the ORM makes them (``toolhub.rowread``), the call attached as ``select_related`` would attach it.
"""

import functools

from django.db import connection

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, DecisionKind
from toolhub.governance import GOVERNANCE_STAMP_SQL
from toolhub.models import ToolCall
from toolhub.prepared import prepared_cursor
from toolhub.rowread import columns_sql, converted, instances_of, lock_clause

__all__ = ["ASKERS_READ", "locked_request", "released_request", "request_decisions"]

#: Where a request read here keeps the ids of who asked for it (``approvals.deciders.asker_ids`` reads it).
ASKERS_READ = "_askers_read"

#: A request's decisions as the decision path reads them: (decision, round, decided_by_id, decided_by_name), oldest
#: first; the name is the one the decider had when deciding (what their event and the desk say).
Decisions = list[tuple[str, int, int | None, str]]

_DECISION_FIELDS = ("decision", "round", "decided_by", "decided_by_name")


def locked_request(request_id: int) -> ApprovalRequest:
    """The request, locked until the transaction ends, with its call; ``ApprovalRequest.DoesNotExist`` if none."""
    key = ApprovalRequest._meta.pk.get_db_prep_value(request_id, connection)  # a malformed id fails as in the ORM
    with prepared_cursor(connection) as cursor:
        cursor.execute(_locked_request_sql(), [key])
        row = cursor.fetchone()
    if row is None:
        raise ApprovalRequest.DoesNotExist(f"ApprovalRequest {request_id} does not exist.")
    request, call = instances_of((ApprovalRequest, ToolCall), row)
    request._state.fields_cache["call"] = call
    return request


def request_decisions(request: ApprovalRequest) -> tuple[Decisions, int | None]:
    """Every decision of ``request``, oldest first (the model's ordering), and the governance stamp as they were read.

    Read after the request's lock, which the decision may have waited for: the stamp is current for judging the
    decider (``approvals.deciders.decider_as_now``), at no round trip of its own. So are who asked for it, kept on
    ``request`` (``ASKERS_READ``): askers are added under that lock (a reopened request), and the locking statement,
    having waited, returns the row as it is now but joins only what its snapshot saw, missing them.
    """
    with prepared_cursor(connection) as cursor:
        cursor.execute(_decisions_sql(), [request.pk, request.pk])
        rows = cursor.fetchall()
    stamp = rows[0][0] if rows else None
    askers = rows[0][1] if rows else None
    request.__dict__[ASKERS_READ] = frozenset(int(pk) for pk in askers.split(",")) if askers else frozenset()
    decisions = [tuple(converted(ApprovalDecision, _DECISION_FIELDS, row[2:])) for row in rows if row[2] is not None]
    return decisions, stamp  # type: ignore[return-value]


def released_request(call_id: object) -> tuple[ApprovalRequest | None, list[tuple[int | None, str]]]:
    """The approved request of call ``call_id`` (``None``: none) and who gave its released round's approvals.

    One statement: the request, who asked for it (kept as ``ASKERS_READ``) and its current round's approvals and
    edits, each giver's id (``None``: the user was deleted since) with the name their decision carries, oldest first.
    """
    key = ApprovalRequest._meta.get_field("call").get_db_prep_value(call_id, connection)
    with prepared_cursor(connection) as cursor:
        cursor.execute(_released_sql(), [key])
        rows = cursor.fetchall()
    if not rows:
        return None, []
    width = len(ApprovalRequest._meta.concrete_fields)
    (request,) = instances_of((ApprovalRequest,), rows[0][:width])
    askers = rows[0][width]
    request.__dict__[ASKERS_READ] = frozenset(int(pk) for pk in askers.split(",")) if askers else frozenset()
    givers = [(by, name) for *_, present, by, name in rows if present is not None]
    return request, list(dict.fromkeys(givers))


@functools.cache
def _released_sql() -> str:
    q = connection.ops.quote_name
    request, decision = ApprovalRequest._meta, ApprovalDecision._meta
    column = {name: q(decision.get_field(name).column) for name in ("request", "round", "decision", "decided_by")}
    return (
        f"SELECT {columns_sql(ApprovalRequest, 'r')}, {_askers_sql('r.' + q(request.pk.column))}, "
        f"d.{q(decision.pk.column)}, d.{column['decided_by']}, d.{q(decision.get_field('decided_by_name').column)} "
        f"FROM {q(request.db_table)} r LEFT JOIN {q(decision.db_table)} d "
        f"ON d.{column['request']} = r.{q(request.pk.column)} AND d.{column['round']} = r.{q('round')} "
        f"AND d.{column['decision']} <> '{DecisionKind.REJECT.value}' "
        f"WHERE r.{q(request.get_field('call').column)} = %s AND r.{q('status')} = '{ApprovalStatus.APPROVED.value}' "
        f"ORDER BY d.{q(decision.get_field('created_at').column)}, d.{q(decision.pk.column)}"
    )


@functools.cache
def _locked_request_sql() -> str:
    q = connection.ops.quote_name
    request_call = q(ApprovalRequest._meta.get_field("call").column)
    requests, calls = q(ApprovalRequest._meta.db_table), q(ToolCall._meta.db_table)
    return (
        f"SELECT {columns_sql(ApprovalRequest, 'r')}, {columns_sql(ToolCall, 'c')} "
        f"FROM {requests} r JOIN {calls} c ON c.{q('id')} = r.{request_call} "
        f"WHERE r.{q(ApprovalRequest._meta.pk.column)} = %s{lock_clause('r')}"
    )


def _askers_sql(request: str = "%s") -> str:
    """The ids of who asked for request ``request`` (SQL), as one comma-separated text (NULL: nobody)."""
    q = connection.ops.quote_name
    askers = ApprovalRequest.askers.through._meta
    asked, asker = (q(askers.get_field(name).column) for name in ("approvalrequest", "user"))
    joined = (
        f"string_agg(CAST({asker} AS text), ',')" if connection.vendor == "postgresql" else f"group_concat({asker})"
    )
    return f"(SELECT {joined} FROM {q(askers.db_table)} WHERE {asked} = {request})"


@functools.cache
def _decisions_sql() -> str:
    """The decisions, each row led by the governance stamp and the askers; one row of those two when there is none."""
    q = connection.ops.quote_name
    columns = ", ".join(f"d.{q(ApprovalDecision._meta.get_field(name).column)}" for name in _DECISION_FIELDS)
    return (
        f"SELECT {GOVERNANCE_STAMP_SQL}, {_askers_sql()}, {columns} FROM (SELECT 1 AS one) AS o "
        f"LEFT JOIN {q(ApprovalDecision._meta.db_table)} d "
        f"ON d.{q(ApprovalDecision._meta.get_field('request').column)} = %s "
        f"ORDER BY d.{q(ApprovalDecision._meta.get_field('created_at').column)}, "
        f"d.{q(ApprovalDecision._meta.pk.column)}"
    )
