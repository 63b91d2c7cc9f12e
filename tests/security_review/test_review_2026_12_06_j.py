"""Security review 2026-12-06 (j): the REST API against other tenants' callers, and the lockout's kept failures.

Findings:
- ``?wait=`` long-polls of ``/api/v1/calls/`` (GETs, not throttled) each held a web worker and a database connection
  up to 30 s with no cap per user: one member could hold every worker. Now at most ``CALL_WAITS_PER_USER`` at once.
- ``OPTIONS /api/docs/`` (anyone) was a 500 (``TemplateDoesNotExist``): the page now answers GET and HEAD only.
- django-axes appended each refused login's GET and POST text (up to 1 KB each) to the pair's one
  ``AccessAttempt`` row while it was locked (``AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT``): one address
  hammering one name grew that row without limit. The kept text is now the latest ``LOGIN_FAILURE_DATA_CHARS``.

Checked and holding (a scratch sweep, no test here): every route of the URLconf and the schema (tools, exports,
calls, call detail/result/cancel/artifact, agents, runs and their retry/cancel/rollback, approvals and their
decisions, sagas and their rollback) with GET, HEAD, OPTIONS, ``?format=api`` and ``?format=json``, ``?tenant=acme``,
``?run=``, ``?user=``, ``?call__run__tenant=``, ids 1..5 enumerated, and POSTs (JSON and multipart) naming acme's
call, run, approval, saga (by id and key), agent and tenant, as globex's user, auditor and operator, a user of no
tenant, a deactivated user's token (401), an operator whose membership was removed (their token reads only globals)
and anonymous (401): no acme row, id or account named, nothing of acme changed; a run body naming ``tenant`` outside
``context`` is ignored, ``context.tenant`` must be one of the caller's, typed context keys are refused; ``?wait=`` is
cut to ``CALL_WAIT_MAX_SECONDS`` and refuses negative and ``inf``; ``page_size`` is capped at 500 and crafted cursors
are refused (404); JSON depth, NUL, lone surrogates, non-finite and over-long numbers and undecodable charsets are
400s before anything is stored; write throttles count per user (GETs are never throttled, hence the wait cap);
error bodies echo only the caller's own input, cut.
"""

import threading
import time

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from tests.helpers import RequestCall
from toolhub.login_attempts import LOGIN_FAILURE_DATA_CHARS
from toolhub.models import CallStatus

pytestmark = [pytest.mark.django_db]

LOGIN = "/admin/login/?next=/admin/"
ATTACKER = "203.0.113.61"


@pytest.mark.usefixtures("lockout_on")
def test_a_locked_pairs_kept_failure_text_stays_bounded(operator: User) -> None:
    """Found: each refused attempt during a lockout appended up to 2 KB to the pair's row, without end.
    Expect: the row keeps at most a bounded tail of the failures' text, the newest attempt's included."""
    client = Client(REMOTE_ADDR=ATTACKER)
    padding = "p" * 1200
    codes = [
        client.post(LOGIN, {"username": "operator", "password": f"g{n}", "note": f"{n}-{padding}"}).status_code
        for n in range(60)
    ]
    assert codes[-1] == 429
    [row] = AccessAttempt.objects.filter(username="operator")
    assert row.failures_since_start == 60
    kept = (len(row.post_data), len(row.get_data))
    assert max(kept) <= LOGIN_FAILURE_DATA_CHARS, kept
    assert "note=59-" in row.post_data and "g59" not in row.post_data


@pytest.mark.parametrize("method", ["OPTIONS", "POST", "PUT", "PATCH", "DELETE"])
def test_the_api_docs_page_answers_every_method_without_a_server_error(method: str) -> None:
    """Found: ``OPTIONS /api/docs/`` (anyone, no login) raised ``TemplateDoesNotExist``: the Swagger page renders only
    with its HTML template, and DRF's metadata answer has none: a 500 per request, each one logged as a server error.
    Expect: the page answers GET and HEAD; any other method is a 405, anonymous or not."""
    client = APIClient(raise_request_exception=False)
    assert client.get("/api/docs/").status_code == 200
    answer = client.generic(method, "/api/docs/")
    assert answer.status_code == 405, (answer.status_code, answer.content[:200])


@pytest.mark.django_db(transaction=True)
def test_one_user_holds_no_more_than_a_few_long_polls_at_once(alice: User, request_call: RequestCall) -> None:
    """Found: ``GET /api/v1/calls/{id}/?wait=30`` (not throttled: a GET) held a web worker and a database connection
    for the whole wait, however many one user sent at once: a handful of them, sent again as each ends, hold every
    worker of a WSGI server (the README's four), the console and everyone's API with them.
    Expect: one user holds at most ``CALL_WAITS_PER_USER`` (2) waits at once; a further one answers at once with the
    call as it is."""
    call = request_call("crm_lookup", {"email": "ada@acme.example"}, alice, tenant="acme")
    assert call.status == CallStatus.AWAITING_RESULT
    url = f"/api/v1/calls/{call.pk}/?wait=3"
    codes: list[int] = []

    def hold() -> None:
        client = APIClient()
        client.force_authenticate(alice)
        codes.append(client.get(url).status_code)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for holder in holders:
        holder.start()
    time.sleep(0.5)  # both waiting
    client = APIClient()
    client.force_authenticate(alice)
    started = time.monotonic()
    answer = client.get(url)
    elapsed = time.monotonic() - started
    for holder in holders:
        holder.join()
    assert answer.status_code == 200 and answer.json()["status"] == "awaiting_result"
    assert elapsed < 1.5, elapsed
    assert codes == [200, 200]
