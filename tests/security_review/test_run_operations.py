"""Rolling back or retrying a run is an action, not a read: the run's own user or an operator of its tenant.

Staff of the run's tenant see every run (auditors, developers), but seeing is not operating: before
this review an auditor's POST to /runs/{id}/rollback/ compensated alice's debit (money moved).
"""

from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User

from agents_app.models import AgentRun, RunStatus
from demo.models import Account
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData, database_state, make_user
from toolhub.models import Tenant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acme_staff(tenant: Tenant, roles: dict[str, Group]) -> dict[str, User]:
    """acme's staff who may read every acme run but not operate it: an auditor, a developer, staff with no role."""
    return {
        "auditor": make_user("acme-auditor", tenant=tenant, staff=True, groups=(roles["auditors"],)),
        "developer": make_user("acme-developer", tenant=tenant, staff=True, groups=(roles["developers"],)),
        "staff": make_user("acme-staff", tenant=tenant, staff=True),
    }


@pytest.mark.parametrize("who", ["auditor", "developer", "staff"])
def test_staff_who_only_read_cannot_roll_back_someone_elses_run(
    who: str, acme: AcmeData, acme_staff: dict[str, User]
) -> None:
    # given a staff member of acme who sees alice's run
    client = client_for(acme_staff[who])
    assert client.get(f"/api/v1/runs/{acme.ledger_run.id}/rollback/").status_code == 200
    before = database_state()

    # when they ask for its rollback
    response = client.post(f"/api/v1/runs/{acme.ledger_run.id}/rollback/")

    # then they are refused and no money moved back, nothing was recorded
    assert response.status_code == 403, response.content
    assert "operator" in response.json()["detail"]
    assert database_state() == before
    assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("900")


@pytest.mark.parametrize("who", ["auditor", "developer", "staff"])
def test_staff_who_only_read_cannot_retry_someone_elses_run(
    who: str, acme: AcmeData, acme_staff: dict[str, User]
) -> None:
    # given a run of alice's that failed for a retryable reason
    AgentRun.objects.filter(pk=acme.ledger_run.pk).update(status=RunStatus.FAILED, retryable=True)
    before = database_state()

    # when a staff member who only reads retries it
    response = client_for(acme_staff[who]).post(f"/api/v1/runs/{acme.ledger_run.id}/retry/")

    # then they are refused and the run stays failed
    assert response.status_code == 403, response.content
    assert database_state() == before


def test_the_runs_own_user_and_acmes_operator_still_operate_it(
    alice: User, acme: AcmeData, acme_operator: User
) -> None:
    AgentRun.objects.filter(pk=acme.ledger_run.pk).update(status=RunStatus.FAILED, retryable=True)

    assert client_for(alice).post(f"/api/v1/runs/{acme.ledger_run.id}/retry/").status_code == 200
    rolled_back = client_for(acme_operator).post(f"/api/v1/runs/{acme.ledger_run.id}/rollback/")

    assert rolled_back.status_code == 202, rolled_back.content
    assert Account.objects.get(account_id="ACC-ACME").balance == Decimal("1000")
