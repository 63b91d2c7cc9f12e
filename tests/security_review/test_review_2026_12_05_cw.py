"""Review of 2026-12-05 (cw): the console forms' shared return address (``admin_back.form_page``) and the Export
box's "No tenant named ..."; the saga page's Retry in one ``marks`` field; the adapters' reasoning (longest of
two fields) and a whole answer's content plus refusal; the README statements since 17:50 UTC.

Each test fails on the reviewed code (main at 6a11df1) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings:

1. A streamed delta whose text field was not text (``content`` as a list of parts or a number, a tool call's
   ``arguments`` as an object, as some OpenAI-compatible servers send) was kept as it came; joining the answer
   later raised ``TypeError``: the run failed as "Model adapter error (TypeError)", logged as the adapter's bug,
   charged nothing of what the endpoint streamed and billed, and with partials shown the reader went on reading
   behind the failed step. A whole answer with the same fields is refused as "not a chat completion". The stream
   now refuses such a delta as it arrives, the same way, charged as read (``RefusedTurn``).
2. ``form_page`` checked the posted ``next`` as Django does, stripped of surrounding spaces, but returned it
   unstripped: ``" /admin/"`` passed and redirected to ``%20/admin/``, a relative address under the form's
   action (a 404). The address returned is now the one checked.

Checked and holding:

- ``form_page``: absolute URLs of another host, ``//evil``, ``///evil``, backslashes (``\\\\evil``, ``/\\evil``),
  ``javascript:`` in any case, ``data:``, ``http:evil``, user-info tricks (``//testserver@evil``,
  ``http://testserver\\@evil``), leading control or Unicode spaces, tabs and newlines inside: all refused (the
  list of calls). Percent-encoded ``%2F%2Fevil`` / ``/%5Cevil`` stay paths of this site. Only the POSTed ``next``
  is read: a ``next`` in the query string and a Referer of another host are ignored. The form fills ``next``
  with ``request.path``.
- A tenant-bound viewer typing another tenant or one that does not exist gets the same 404 ("No such tenant."),
  before the tenant is looked up; "No tenant named ..." is said only to viewers whose scope is everything
  (superusers, ``CROSS_TENANT_PERMISSION``), who may list every tenant anyway. The message is escaped.
- A refused export (no right, outside the boundary, unknown tenant, bad range) records nothing in the trail:
  ``audit_export_start`` runs only after the tenant and range were accepted.
- The saga page's Retry: POST only (``require_POST`` inside ``admin_view``: a GET answers 405), CSRF-protected by
  ``admin_view``; another tenant's saga is absent from ``get_object`` (redirect "doesn't exist", nothing retried);
  a missing or forged ``marks`` field is compared under the saga's lock and refused as stale, nothing retried.
- ``reasoning_texts``: non-string values are ignored (no reasoning, not an error); of two texts the longer
  counts; each delta's reasoning counts against the stream's bound as it arrives. A whole answer's non-string
  ``content`` is refused as not a chat completion; a non-string ``refusal`` is no refusal.

- README since 17:50 UTC: the chaos run's figures match ``benchmarks/results/chaos.json`` (690 calls, 14 pool and 6
  worker kills, 9 flushes, 6 disconnections, 3 Redis restarts, 7 terminations, 811 duplicates, 675/675, 2,962
  events, 5 ``needs_attention``); the offline verifier runs with no ``DJANGO_SETTINGS_MODULE``; "No tenant named"
  for platform auditors; ``audit.export_started`` left out by a range ending before it; the quick start's ``make
  run`` / ``make test`` / ``make test-fast`` match the Makefile. One was false and is corrected (documentation, no
  test): the tour's ``.venv/bin/python manage.py drf_create_token`` and ``verify_audit`` fail as written
  (``DJANGO_SECRET_KEY is not set``); they now set ``DJANGO_DEBUG=1`` as ``make run`` does.

Noted, not changed:

- The stream's bound counts what is interpreted (text, reasoning, calls), not the bytes read: a delta carrying an
  unknown or non-string field of any size (a ``reasoning`` object) is read without counting, until the deadline.
  A bound on the transport's bytes would cover it; it is a change of the reader, not of this review's code.
- "No tenant named ..." repeats the typed text unbounded into the session's messages (a platform auditor's own).
"""

from typing import Any

import pytest
from django.test import RequestFactory, override_settings
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from agents_app.models_adapters.base import RefusedTurn
from agents_app.models_adapters.streaming import StreamedTurn
from toolhub.admin_back import form_page


def _chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
    """A chunk as the SDK builds it from the endpoint's JSON: fields are not validated (``construct``)."""
    return construct_type(  # type: ignore[no-any-return]
        type_=ChatCompletionChunk,
        value={
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        },
    )


@pytest.mark.parametrize(
    "delta",
    [
        {"content": [{"type": "text", "text": "Hello"}]},
        {"content": 5},
        {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "t", "arguments": {"a": 1}}}]},
    ],
    ids=["content-parts", "content-number", "arguments-object"],
)
def test_a_streamed_text_field_that_is_not_text_is_refused_as_it_arrives(delta: dict[str, Any]) -> None:
    """Found: the delta's value was kept; ``turn()`` (and ``text()``, read for partials) raised ``TypeError`` while
    joining it, so the run failed as the adapter's bug, charged nothing of what the endpoint streamed.

    Expect: the chunk is refused when it arrives, as a whole answer's is, with ``RefusedTurn`` charged as read.
    """
    streamed = StreamedTurn(max_bytes=10_000, prompt_characters=40)
    streamed.add(_chunk({"content": "Thinking it over. " * 4}))

    with pytest.raises(RefusedTurn, match="not a chat completion") as refused:
        streamed.add(_chunk(delta))

    assert refused.value.completion_tokens > 0 and refused.value.prompt_tokens > 0
    assert streamed.text() == "Thinking it over. " * 4  # the text so far still reads (partials)


@override_settings(ALLOWED_HOSTS=["testserver"])
def test_the_return_address_checked_is_the_one_returned() -> None:
    """Found: ``" /admin/"`` passed the check (Django strips it) and was returned as is: a redirect to
    ``%20/admin/``, resolved under the form's action to a page that does not exist.

    Expect: the stripped address, the one checked; another site's address with spaces is still refused.
    """
    factory = RequestFactory()

    assert form_page(factory.post("/admin/toolhub/audit/export/", {"next": " /admin/ "})) == "/admin/"
    assert form_page(factory.post("/x", {"next": "  //evil.example/ "})) == "/admin/toolhub/toolcall/"
