"""No REST API read costs a query per row: lists and details issue as many queries for many rows as for few.

Every GET route under ``/api/v1/`` is found in the URL configuration and is either measured here
(``MEASURED``) or left out with a reason (``LEFT_OUT``), so that a new endpoint cannot be forgotten;
routes whose views answer only POST are not reads. ``/api/schema/`` and ``/api/docs/`` (outside
``/api/v1/``) describe the API and read no rows. Each measured endpoint is read by an operator and by
alice, once with ``FEW`` rows and once with ``MORE``, right after a governance change (its per-process
cache dropped) and again, and must issue the same number of queries each time.

Measured on PostgreSQL, for 2 rows and for 8 alike (warm; right after a governance change where it
differs): agents 4, approvals 5, one approval 5, calls 5, one call 7, one run 7, a run's rollback 9 (was 7:
its subagent runs are walked one query per level, 2 here, and their sagas read with its own), sagas 6,
one saga 6, runs 4, the catalogue 3 for the operator and 7 (19) for alice, a provider export 4 (16).
Most of them are the reader's permissions (2 queries) and tenants (1), read once per request.
"""

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from agents_app.models import AgentRun
from agents_app.services import agent_create, run_start
from approvals.models import ApprovalDecision, ApprovalRequest, DecisionKind
from approvals.services import approval_approve
from tests.helpers import RequestCall
from toolhub.audit import audit_call_event
from toolhub.catalogue import tool_catalogue_sync
from toolhub.models import Tenant, ToolCall, ToolCallArtifact
from toolhub.sagas.models import Compensation, Rollback, RollbackTrigger, Saga
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

API = "api/v1/"
#: How many rows the endpoints show in the first read, and in the second.
FEW, MORE = 2, 8
#: An operator (staff: every row of tenant acme) and alice (a member of acme: her own rows) read each endpoint.
READERS = ("operator", "alice")
#: Lists are read whole (the default page of 50 would hide the catalogue's added tools).
WHOLE = "?page_size=500"

#: GET routes under /api/v1/ not measured here, and why.
LEFT_OUT = {
    "agent-detail": "one agent with its tenant and provider (joined); it embeds no rows",
    "call-artifact": "the bytes of one artifact; it embeds no rows",
}


def api_get_routes() -> dict[str, str]:
    """Every named route under ``/api/v1/`` whose view answers GET: its name -> its pattern."""
    routes: dict[str, str] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
                continue
            assert isinstance(entry, URLPattern)
            route = prefix + str(entry.pattern)
            view = getattr(entry.callback, "view_class", None) or getattr(entry.callback, "cls", None)
            if route.startswith(API) and (view is None or hasattr(view, "get")):
                assert entry.name, f"{route} has no name to list it by"
                routes[entry.name] = route

    walk(get_resolver().url_patterns, "")
    return routes


@dataclass
class Rows:
    """Makes the rows the endpoints show, all alice's in tenant acme, through the services where practical.

    Lists are topped up to the number of rows asked for (``listed`` remembers how many were added);
    details get a fresh parent with that many related rows. Sagas, compensations, rollbacks,
    decisions, artifacts and subagent runs are written directly: through the services each would
    take a failing run, a round of approvals or a tool that returns files.
    """

    alice: User
    operator: User
    request_call: RequestCall
    committed: Callable[..., Any]
    stack: ExitStack
    listed: dict[str, int] = field(default_factory=dict)

    def top_up(self, route: str, count: int) -> range:
        """The numbers of the rows to add so that the list of ``route`` shows ``count`` added rows."""
        done = self.listed.get(route, 0)
        self.listed[route] = max(done, count)
        return range(done, count)

    def call(self, tool_name: str, note: str) -> ToolCall:
        arguments = {"label": note} if tool_name == "saga_step" else {"note": note}
        return self.request_call(tool_name, arguments, self.alice, tenant="acme")

    def artifact(self, call: ToolCall, number: int) -> None:
        ToolCallArtifact.objects.create(
            call=call, name=f"a{number}.txt", media_type="text/plain", size=1, sha256="0" * 64, content=b"x"
        )

    def saga(self, key: str, steps: int, *, run_id: uuid.UUID | None = None) -> Saga:
        """A saga of ``steps`` completed steps of alice's, each with its compensation and a rollback."""
        saga = Saga.objects.create(
            key=key, run_id=run_id, tenant="acme", last_sequence=steps, created_by=None if run_id else self.alice
        )
        for number in range(steps):
            step = self.call("saga_step", f"{key}-{number}")
            rollback = Rollback.objects.create(saga=saga, trigger=RollbackTrigger.ON_DEMAND, requested_by="user:alice")
            Compensation.objects.create(
                saga=saga,
                sequence=number + 1,
                rollback=rollback,
                step_call=step,
                step_tool="saga_step",
                tool_name="undo_saga_step",
                arguments={"step_id": number, "label": f"{key}-{number}"},
            )
        return saga

    def run(self, calls: int) -> AgentRun:
        """A run of alice's whose model asked for ``calls`` calls that wait for approval."""
        script = [
            {"tool_calls": [{"name": "risky_effect", "arguments": {"note": f"n{i}"}} for i in range(calls)]},
            {"content": "done"},
        ]
        agent = agent_create(
            name=f"runner-{uuid.uuid4().hex[:8]}",
            tenant="acme",
            script=script,
            tools=["risky_effect"],
            max_tool_calls=50,
        )
        run: AgentRun = self.committed(run_start, agent=agent, user=self.alice, input="go")
        run.refresh_from_db()
        return run


# --- what each measured endpoint is given, and how many of its rows a response shows --------------------


def _extra(note: str) -> str:
    """A tool that makes the catalogue longer."""
    return note


def _tools(rows: Rows, count: int) -> None:
    """Registered tools (for this test), mirrored into the catalogue as ``manage.py sync_tools`` does."""
    added = [Tool.from_function(_extra, name=f"zz_extra_{number:03}") for number in rows.top_up("tools", count)]
    rows.stack.enter_context(registry.temporarily(*added))
    tool_catalogue_sync()


def tool_list(rows: Rows, count: int) -> str:
    _tools(rows, count)
    return f"/api/v1/tools/{WHOLE}"


def tool_export(rows: Rows, count: int) -> str:
    _tools(rows, count)
    return "/api/v1/tools/export/openai/"


def call_list(rows: Rows, count: int) -> str:
    """Calls, each with an artifact."""
    for number in rows.top_up("calls", count):
        rows.artifact(rows.call("record_effect", f"call {number}"), number)
    return f"/api/v1/calls/{WHOLE}"


def call_detail(rows: Rows, count: int) -> str:
    """One call with ``count`` artifacts and ``count`` more audit events."""
    call = rows.call("record_effect", "detailed")
    with transaction.atomic():
        for number in range(count):
            rows.artifact(call, number)
            audit_call_event(call, "call.note", actor="test", data={"number": number})
    return f"/api/v1/calls/{call.pk}/"


def agent_list(rows: Rows, count: int) -> str:
    for number in rows.top_up("agents", count):
        agent_create(name=f"agent-{number}", tenant="acme", script=[{"content": "hi"}], tools=["record_effect"])
    return f"/api/v1/agents/{WHOLE}"


def run_list(rows: Rows, count: int) -> str:
    """Runs of alice's, each with its agent."""
    for _ in rows.top_up("runs", count):
        rows.run(0)
    return f"/api/v1/runs/{WHOLE}"


def run_detail(rows: Rows, count: int) -> str:
    """A run with ``count`` calls, ``count`` pending approvals and ``count`` subagent runs."""
    run = rows.run(count)
    for _ in range(count):
        AgentRun.objects.create(
            agent=run.agent, user=rows.alice, tenant="acme", input="sub", parent_run=run, parent_call_id=uuid.uuid4()
        )
    return f"/api/v1/runs/{run.pk}/"


def run_rollback(rows: Rows, count: int) -> str:
    """A run's saga with ``count`` compensations and rollbacks, and ``count`` subagent runs with a saga each."""
    run = rows.run(0)
    rows.saga(str(run.id), count, run_id=run.id)
    for _ in range(count):
        child = AgentRun.objects.create(
            agent=run.agent, user=rows.alice, tenant="acme", input="sub", parent_run=run, parent_call_id=uuid.uuid4()
        )
        rows.saga(str(child.id), 1, run_id=child.id)
    return f"/api/v1/runs/{run.pk}/rollback/"


def approval_list(rows: Rows, count: int) -> str:
    """Requests of alice's calls, each approved by the operator."""
    for number in rows.top_up("approvals", count):
        held = ApprovalRequest.objects.get(call=rows.call("risky_effect", f"held {number}"))
        rows.committed(approval_approve, request_id=held.pk, user=rows.operator, comment="ok")
    return f"/api/v1/approvals/{WHOLE}"


def approval_detail(rows: Rows, count: int) -> str:
    """A request with ``count`` decisions, one per round of edits."""
    held = ApprovalRequest.objects.get(call=rows.call("risky_effect", "edited"))
    for number in range(count):
        ApprovalDecision.objects.create(
            request=held,
            decided_by=rows.operator,
            decided_by_name=rows.operator.username,
            decision=DecisionKind.EDIT,
            round=number + 1,
            comment=f"edit {number}",
        )
    ApprovalRequest.objects.filter(pk=held.pk).update(round=count + 1)
    return f"/api/v1/approvals/{held.pk}/"


def saga_list(rows: Rows, count: int) -> str:
    for number in rows.top_up("sagas", count):
        rows.saga(f"trip-{number}", 1)
    return f"/api/v1/sagas/{WHOLE}"


def saga_detail(rows: Rows, count: int) -> str:
    key = f"detail-{count}"
    rows.saga(key, count)
    return f"/api/v1/sagas/{key}/"


def results(body: Any) -> int:
    return len(body["results"])


@dataclass(frozen=True)
class Case:
    """How to give an endpoint ``count`` rows (returning the URL to read), and what of a response grows with them."""

    given: Callable[[Rows, int], str]
    shown: dict[str, Callable[[Any], int]]


MEASURED = {
    "tool-list": Case(tool_list, {"tools": results}),
    "tool-export": Case(tool_export, {"tools": len}),
    "call-list": Case(call_list, {"calls": results}),
    "call-detail": Case(
        call_detail, {"artifacts": lambda body: len(body["artifacts"]), "audit": lambda body: len(body["audit_events"])}
    ),
    "agent-list": Case(agent_list, {"agents": results}),
    "run-list": Case(run_list, {"runs": results}),
    "run-detail": Case(
        run_detail,
        {
            "tool_calls": lambda body: len(body["tool_calls"]),
            "pending_approvals": lambda body: len(body["pending_approvals"]),
            "children": lambda body: len(body["children"]),
        },
    ),
    "run-rollback": Case(
        run_rollback,
        {
            "compensations": lambda body: len(body["compensations"]),
            "rollbacks": lambda body: len(body["rollbacks"]),
            "subagent_sagas": lambda body: len(body["subagent_sagas"]),
        },
    ),
    "approval-list": Case(approval_list, {"requests": results}),
    "approval-detail": Case(approval_detail, {"decisions": lambda body: len(body["decisions"])}),
    "saga-list": Case(saga_list, {"sagas": results}),
    "saga-detail": Case(
        saga_detail,
        {
            "compensations": lambda body: len(body["compensations"]),
            "rollbacks": lambda body: len(body["rollbacks"]),
        },
    ),
}


@pytest.fixture
def rows(alice: User, operator: User, request_call: RequestCall, committed: Callable[..., Any]) -> Iterator[Rows]:
    with ExitStack() as stack:
        yield Rows(alice=alice, operator=operator, request_call=request_call, committed=committed, stack=stack)


def governance_changed(tenant: Tenant) -> None:
    """A change to a governed table: every process drops the governance lookups it cached (``toolhub.governance``)."""
    Tenant.objects.filter(pk=tenant.pk).update(name=F("name"))


def read(user: User, url: str, tenant: Tenant) -> tuple[Any, dict[str, list[str]]]:
    """GET ``url`` as ``user`` would, right after a governance change and again: the body, and the SQL of each read.

    Each read authenticates a freshly loaded user, as each request does (permissions and tenants are
    cached on the user object).
    """
    governance_changed(tenant)
    sql = {}
    for cache in ("cold", "warm"):
        client = APIClient()
        client.force_authenticate(User.objects.get(pk=user.pk))
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, response.content
        sql[cache] = [query["sql"] for query in queries.captured_queries]
    return response.json(), sql


def test_every_get_route_of_the_api_is_measured_or_left_out_with_a_reason() -> None:
    routes = api_get_routes()

    assert set(routes) == set(MEASURED) | set(LEFT_OUT), "measure a new GET endpoint here, or say why not"
    assert not set(MEASURED) & set(LEFT_OUT)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("route", sorted(MEASURED))
def test_a_read_issues_as_many_queries_for_many_rows_as_for_few(
    route: str, reader: str, rows: Rows, request: pytest.FixtureRequest, tenant: Tenant
) -> None:
    # given
    case = MEASURED[route]
    user = request.getfixturevalue(reader)

    # when the endpoint shows a few rows, then several more
    few, few_sql = read(user, case.given(rows, FEW), tenant)
    more, more_sql = read(user, case.given(rows, MORE), tenant)

    # then the rows were there to see
    grown = {name: shown(more) - shown(few) for name, shown in case.shown.items()}
    assert grown == dict.fromkeys(case.shown, MORE - FEW)
    # and they cost no query of their own, whether the governance cache was warm or just dropped
    for cache in ("cold", "warm"):
        assert len(more_sql[cache]) == len(few_sql[cache]), (
            f"{route} as {reader} ({cache}): {len(few_sql[cache])} queries for {FEW} rows, "
            f"{len(more_sql[cache])} for {MORE}:\n" + "\n".join(more_sql[cache])
        )
