"""Review of 2026-12-05 (dl): request sizes of the console's confirmations and of forms read before authentication.

Each test fails on the reviewed code (main at 1b57c51) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. The sagas' Retry / Resolve-by-hand confirmation pages (and the saga page's own Retry) carried the mark of every
   compensation they listed in their ``marks`` field: it grew with the compensations needing attention, not with
   the selected rows (a saga of direct calls has no step cap), so past ``DATA_UPLOAD_MAX_MEMORY_SIZE`` the
   confirming POST got Django's bare 400: the operator could not confirm at all, and was not told why. Those pages
   now carry one digest of the marks they listed (``toolhub.admin_marks.seen_field``), which the services compare
   with the digest of the marks they read under the sagas' locks: the same binding (any compensation that moved,
   joined or left refuses the whole action), a field of constant size however many rows the page lists.
2. ``StorableAddressMiddleware`` read ``request.POST`` of every request before authentication: an anonymous client
   made the server parse a multipart body of any size (file parts are not counted by
   ``DATA_UPLOAD_MAX_MEMORY_SIZE`` and spill to disk) before ``/api/`` answered 401. A body whose ``Content-Length``
   is over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is now refused before a byte is read: 413 in the API's shape under
   ``/api/`` (``body_too_big``, as a JSON body over the limit answers), Django's bad request page elsewhere.

Checked and holding:

- The per-row bindings (approvals' confirmation pages, remote MCP tools' "Accept offered": ``row_mark`` /
  ``row_bindings``) hold one mark per selected row, and the rows are bounded by ``rows_per_confirmation``: their
  field grows with the selection, which is already bounded; they keep per-row marks (each row is refused alone).
- No toolhub form or API view takes a file upload (no ``FileField``, no ``request.FILES``), so refusing a body over
  ``DATA_UPLOAD_MAX_MEMORY_SIZE`` as a whole, multipart framing included, refuses nothing a page or client sends.
- A request without ``Content-Length`` (chunked) reads nothing as its body under WSGI, so it cannot get past the bound.
"""

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http.multipartparser import MultiPartParser
from django.test import Client

from tests.helpers import action_confirmation, console
from tests.tenancy.conftest import AcmeData
from toolhub.models import ToolCall
from toolhub.sagas.models import Compensation, CompensationStatus, Saga, SagaStatus

SAGAS = "/admin/sagas/saga/"


def _many_needing_attention(acme: AcmeData, count: int) -> list[Compensation]:
    """acme's saga with ``count`` more compensations that failed: each one listed on the confirmation page."""
    Saga.objects.filter(pk=acme.saga.pk).update(status=SagaStatus.NEEDS_ATTENTION)
    steps = []
    for _ in range(count):  # a compensation per step call: copies of acme's artifact call
        step = ToolCall.objects.get(pk=acme.artifact_call.pk)
        step.pk = uuid.uuid4()
        step._state.adding = True
        steps.append(step)
    ToolCall.objects.bulk_create(steps)
    return Compensation.objects.bulk_create(
        Compensation(
            saga=acme.saga,
            tenant=acme.saga.tenant,  # bulk_create skips save(): the database holds it (sagas 0013)
            sequence=acme.compensation.sequence + 1 + n,
            step_call=step,
            step_tool=step.tool_name,
            tool_name="credit",
            status=CompensationStatus.FAILED,
            last_error="the bank timed out",
        )
        for n, step in enumerate(steps)
    )


def _messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.mark.django_db(transaction=True)
def test_resolving_a_saga_of_many_compensations_can_be_confirmed(
    settings: Any, acme: AcmeData, acme_operator: User
) -> None:
    """Found: "Resolve by hand" on a saga with 60 failed compensations listed each one's mark in the page's field;
    with ``DATA_UPLOAD_MAX_MEMORY_SIZE`` at 2,000 bytes the confirming POST was over it and Django answered a bare
    400: no way to confirm, no reason given.

    Expect: the page's field stays small (one word whatever the rows); confirming resolves the 60 compensations.
    """
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    failed = _many_needing_attention(acme, 60)
    client = console(acme_operator)
    confirmation = action_confirmation(client, SAGAS, "resolve_selected", [acme.saga.pk])

    answer = client.post(SAGAS, {**confirmation, "note": "refunded by hand"}, follow=True)

    assert answer.status_code == 200, answer.status_code
    assert len(confirmation["marks"]) < 200
    assert "60 compensation(s) resolved." in _messages(answer), _messages(answer)
    assert Compensation.objects.filter(pk__in=[c.pk for c in failed], status=CompensationStatus.RESOLVED).count() == 60


@pytest.mark.django_db(transaction=True)
def test_a_compact_page_still_binds_exactly_what_it_listed(settings: Any, acme: AcmeData, acme_operator: User) -> None:
    """Found: (with a compact field) the binding must hold as it did with the full marks.

    Expect: one of the 60 listed compensations moves after the page was read (an attempt more): the confirm is
    refused ("changed since you read this page; nothing was resolved"), none resolved.
    """
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    failed = _many_needing_attention(acme, 60)
    client = console(acme_operator)
    confirmation = action_confirmation(client, SAGAS, "resolve_selected", [acme.saga.pk])
    Compensation.objects.filter(pk=failed[30].pk).update(attempts=1)

    answer = client.post(SAGAS, {**confirmation, "note": "refunded by hand"}, follow=True)

    assert answer.status_code == 200, answer.status_code
    assert any("changed since you read this page; nothing was resolved" in m for m in _messages(answer))
    assert not Compensation.objects.filter(status=CompensationStatus.RESOLVED).exists()


@pytest.mark.django_db(transaction=True)
def test_the_saga_page_retry_of_many_compensations_is_not_refused_by_size(
    settings: Any, acme: AcmeData, acme_operator: User
) -> None:
    """Found: the saga page's Retry button posted every needing compensation's mark: with 60 of them and
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` at 2,000 bytes, Django answered a bare 400.

    Expect: the button's field is one short word; posting it retries the 60 compensations the page showed.
    """
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    _many_needing_attention(acme, 60)
    client = console(acme_operator)
    hidden = client.get(f"{SAGAS}{acme.saga.pk}/change/").context["retry_hidden"]

    answer = client.post(f"{SAGAS}{acme.saga.pk}/retry/", hidden, follow=True)

    assert answer.status_code == 200, answer.status_code
    assert "60 compensation(s) retried." in _messages(answer), _messages(answer)
    assert len(hidden["marks"]) < 200


def _parses_recorded(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A list that gets an entry each time the multipart parser runs."""
    parsed: list[bool] = []
    real_parse = MultiPartParser.parse

    def spy(self: MultiPartParser) -> Any:
        parsed.append(True)
        return real_parse(self)

    monkeypatch.setattr(MultiPartParser, "parse", spy)
    return parsed


@pytest.mark.django_db
def test_an_anonymous_oversized_multipart_body_is_refused_before_it_is_parsed(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: an anonymous POST to ``/api/`` with a multipart file part of 50 kB (``DATA_UPLOAD_MAX_MEMORY_SIZE`` at
    10 kB: file parts are not counted) was parsed whole by ``StorableAddressMiddleware`` before the API answered 401.

    Expect: refused 413 in the API's shape naming the limit, from ``Content-Length`` alone: the multipart parser
    never runs.
    """
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    parsed = _parses_recorded(monkeypatch)

    upload = SimpleUploadedFile("big.bin", b"x" * 50_000)
    answer = Client().post("/api/v1/runs/", {"file": upload, "agent": "x"})

    assert answer.status_code == 413, answer.status_code
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE (10,000 bytes)" in answer.json()["detail"]
    assert parsed == []


@pytest.mark.django_db
def test_an_oversized_console_body_is_refused_before_it_is_parsed(
    settings: Any, monkeypatch: pytest.MonkeyPatch, acme_operator: User
) -> None:
    """Found: the same multipart body to the console was parsed whole before any view.

    Expect: Django's bad request page (400), the parser never run; a small form still reaches the console.
    """
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    parsed = _parses_recorded(monkeypatch)

    client = console(acme_operator)
    answer = client.post(SAGAS, {"file": SimpleUploadedFile("big.bin", b"x" * 50_000), "action": "retry_selected"})

    assert answer.status_code == 400
    assert parsed == []
    assert client.post(SAGAS, {"action": "retry_selected"}, follow=True).status_code == 200
