"""Review 2026-12-06 (av): the REST API and MCP server as a member, operator or auditor of one tenant.

Findings:
- A multipart body whose file part sits where a serializer takes a dict's values (a run's ``context.<key>``)
  reached the database as an ``UploadedFile`` and was a 500 (``TypeError: not JSON serializable``); the API takes
  no files anywhere, so its multipart parser (``toolhub.api.parsers``) now refuses any file part (400). Elsewhere
  a file part was a 400 by luck of the field (``Not a valid string``) or silently dropped (an agent's
  ``script[0]<key>``).

Checked and holds (globex's member, operator and auditor against acme's rows; routes from the URL resolver):
- Every id route (calls, results, cancels, artifacts, runs and their retry/cancel/rollback, approvals and their
  decisions, agents, sagas) answers acme's id exactly as a missing one (same 404 body); integer ids (agents,
  approvals, artifacts) too, and starting a run with acme's agent id or name reads "Unknown agent".
- Filters naming acme's run, tool, tenant or agent (``?run=``, ``?tool=``, ``?tenant=``, ``?agent=``,
  ``?name=``) narrow the caller's own rows only (empty); ``?tenant=acme`` on the catalogue export is a 400 like an
  unknown tenant; ``?page_size=`` is capped at 500; no ordering or expand parameter exists.
- ``tenant`` in a call's or saga's body, or in a direct call's context (JSON and urlencoded alike), is refused
  for a non-member; an agent's tenant cannot be PATCHed; run summaries are read-only; saga ids are per tenant
  (acme's id opens a new globex saga, no "in use" oracle).
- OPTIONS answers the same for acme's id and a missing one and lists no related-field choices; the browsable
  API's forms use serializers with no writable related field; the filters are CharFilter/ChoiceFilter (no
  ModelChoiceFilter to list rows).
- Error bodies: invalid values of ``sensitive=`` arguments (too long, wrong type, not a literal, as an extra key)
  are named, never echoed; an unknown context key is named without its value; an idempotency conflict names the
  earlier call only; an invalid call stores no arguments.
- Inside acme: a plain member (carol) gets 404 on each of alice's rows and actions, as for missing ones; acme's
  auditor reads them and gets 403 on approve, reject, result, cancel, run rollback/cancel/retry. Idempotency keys are
  per user (globex's same key makes its own call; its conflict names only its own call); another acme member's
  call into alice's direct saga id is refused ("not available").
- MCP registers no resources or prompts handlers (``Method not found`` for all), and tools/list, tools/call and
  the status/cancel tools were covered by the 2026-12-05 cf review (acme's tool reads as a missing one).
"""

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile

from agents_app.models import AgentRun
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import AcmeData

pytestmark = pytest.mark.django_db(transaction=True)


def _file(content: bytes = b'{"a": 1}') -> SimpleUploadedFile:
    return SimpleUploadedFile("part.json", content, content_type="application/json")


def test_a_file_part_in_a_runs_context_is_refused_not_a_500(acme: AcmeData, alice: User) -> None:
    """Found: ``POST /api/v1/runs/`` multipart with a file in ``context.x`` stored the upload object: a 500.

    Expect: 400 saying the API takes no files; no run is started.
    """
    client = client_for(alice)
    client.raise_request_exception = False
    runs = AgentRun.objects.count()

    response = client.post(
        "/api/v1/runs/", {"agent": "acme-ledger", "input": "hello", "context.x": _file()}, format="multipart"
    )

    assert response.status_code == 400, response.content[:300]
    assert "file" in response.json()["detail"].lower()
    assert AgentRun.objects.count() == runs
