"""Review du (2026-12-05): the agent runs surface as a plain member of acme, acme's operator, and a member of both.

Findings:

1. Retrying a run (``POST /api/v1/runs/{id}/retry/``) moved a failed run back to ``running`` and spent more model
   turns in its user's name without any audit event: an operator retrying alice's run left no trace of who did,
   whereas cancelling (``run.cancelled``) and rolling back (``saga.rollback_requested``) name their actor. Fixed in
   ``agents_app.services.run_retry``: it takes the person asking and appends ``run.retried`` (actor, previous stop
   reason) in the transaction that moves the run.

Checked and holding (not redone here):
- starting a run: another tenant's agent (by id or by name) answers like a missing one; ``context.tenant`` naming a
  tenant one is not in is refused; a member of both tenants runs acme's agent only in acme (naming globex finds no
  such agent); reserved context keys (tenant, user, run_id, saga_id, ...) and typed-context keys are refused; the
  run request names no provider, model or script (``RunInputSerializer`` has no such field).
- retry, cancel, rollback: 404 for another tenant's run (visibility first), 403 for staff who only read and for
  another plain member's run; the member of both acts on their runs in either tenant, the run's own tenant
  authorizing an operator (``run_may_operate``); a child run is retried never (409), cancelled with its parent.
- a resumed (retried) run whose user lost their standing is cancelled by the loop before any model turn
  (``loop._begin_step``); calls are re-authorized at execution.
- subagents: child run takes the parent's user, tenant and context, an agent of that tenant or a global one, its
  budget carved from the parent's (reviews r, b); child runs listed only to readers of the parent (same user/tenant).
- paused SDK runs: only their own user, within their tenants, claims one (``paused_run_claim``); the admin page
  never shows ``state``.
- concurrency on PostgreSQL (checked with a scratch test, another session holding the run's row lock while two
  requests queue on it): two cancels of one run end it once (one 409, one ``run.cancelled``); two retries move it
  once (one 409, one ``run.retried``): ``locked_run`` / ``select_for_update`` then the status test under the lock.
- idempotency keys (direct calls) are per tenant and user (``CallIdempotencyKey``); runs take none.
- a run's context takes any key but the reserved and typed-context ones (documented: unlike a direct call's, it is
  not cut to ``CLIENT_CONTEXT_KEYS``), and the boundary's values always win over it (``ToolContext.layered``).
- run lists: scoped before filtering (``RunFilter.tenant`` narrows only), cursor pagination, no ordering parameter.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun, RunStatus, StopReason
from agents_app.services import agent_create
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData
from toolhub.models import AuditEvent, Tenant, TenantMembership

pytestmark = pytest.mark.django_db(transaction=True)


def _failed_retryable(run: AgentRun) -> None:
    AgentRun.objects.filter(pk=run.pk).update(
        status=RunStatus.FAILED, retryable=True, stop_reason=StopReason.MODEL_ERROR, error="endpoint down"
    )


def test_an_operators_retry_of_someone_elses_run_is_audited(acme: AcmeData, acme_operator: User) -> None:
    """Found: an operator's retry of alice's failed run left no audit event naming who restarted it.

    Expect: one ``run.retried`` event in acme's chain, actor ``user:acme-operator``, with the stop reason it had.
    """
    # given alice's run failed for a retryable reason
    _failed_retryable(acme.ledger_run)

    # when acme's operator retries it
    response = client_for(acme_operator).post(f"/api/v1/runs/{acme.ledger_run.id}/retry/")

    # then the retry is in the run's trail, naming the operator
    assert response.status_code == 200, response.content
    events = AuditEvent.objects.filter(run_id=acme.ledger_run.id, event_type="run.retried")
    assert [(e.actor, e.tenant, e.payload.get("stop_reason")) for e in events] == [
        ("user:acme-operator", "acme", StopReason.MODEL_ERROR.value)
    ]


def test_a_refused_retry_writes_nothing(alice: User, acme: AcmeData) -> None:
    """Found: (with the fix) the event must be written only when the run moves.

    Expect: a retry of a completed run answers 409 and leaves no ``run.retried`` event.
    """
    response = client_for(alice).post(f"/api/v1/runs/{acme.ledger_run.id}/retry/")

    assert response.status_code == 409, response.content
    assert not AuditEvent.objects.filter(event_type="run.retried").exists()


def test_a_member_of_both_tenants_cannot_run_acmes_agent_in_globex(
    alice: User, acme: AcmeData, other_tenant: Tenant
) -> None:
    """Found: nothing (holds). Expect: alice, also in globex, naming globex with acme's agent gets 400, no run."""
    TenantMembership.objects.create(user=alice, tenant=other_tenant)
    own = agent_create(name="acme-own", tenant="acme", provider="scripted", script=[{"content": "hi"}])
    before = AgentRun.objects.count()
    client = client_for(alice)

    by_id: Any = client.post(
        "/api/v1/runs/", {"agent_id": own.pk, "input": "x", "context": {"tenant": "globex"}}, format="json"
    )
    by_name: Any = client.post(
        "/api/v1/runs/", {"agent": own.name, "input": "x", "context": {"tenant": "globex"}}, format="json"
    )

    assert (by_id.status_code, by_name.status_code) == (400, 400), (by_id.content, by_name.content)
    assert AgentRun.objects.count() == before
