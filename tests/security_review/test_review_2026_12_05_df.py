"""Review of the REST API surface (2026-12-05, df): anonymous, a plain tenant-A member, tenant-A staff.

Findings (each a test below, failing on the code as found):

1. The browsable API (``?format=api`` / ``Accept: text/html``) drew values raw: a bidi override or a zero-width
   space in a call's arguments read as something else on the page. Its response panel now goes through
   ``toolhub.visible`` (``toolhub.api.renderers.VisibleBrowsableAPIRenderer``, the default renderer and the
   catalogue's), as the admin does; JSON answers keep the characters as stored.
2. A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` answered ``{"error": "Bad Request (400)"}`` (JSON) or a "Multipart
   form parse error" (a form-encoded body): neither the API's ``{"detail": ...}`` shape nor a reason. Both now
   answer 413 naming the limit (``toolhub.api.error_pages.body_too_big``, used by the error page and the
   middleware), documented in the schema for every operation with a body.

Checked and holds (probed as anonymous, alice (plain acme member), carol (acme member, not the requester), acme's
operator and auditor, globex's operator):

- anonymous: every ``/api/v1/`` list and export answers 401 with no data; ``/api/schema/`` and ``/api/docs/`` are
  public but hold no tool, tenant or account name (tools are enums nowhere; the catalogue is only in answers).
- scoping: another member's or tenant's call, result, cancel, saga and approval answer 404 (``No ... matches``), the
  same as a missing id; ``?tenant=globex`` on runs lists nothing; lists use cursor pagination (no counts) and no
  ordering or search backend, so nothing sorts or counts across tenants.
- writes checked when they run: the auditor gets 403 on result, cancel, run rollback and approve; alice 403 on
  approve (no permission) and on agent PATCH; the operator's own direct call cannot be approved or rejected by
  them (403 "You started this call"); an out-of-range ``round`` answers 409, not a 500; an id written ``00042``
  is the same row (Django's ``int`` converter), so the four-eyes check sees the same request.
- mass assignment: ``user``/``status`` form fields on ``POST /calls/`` are ignored; ``tenant`` naming another
  tenant is refused (400); ``context`` with ``tenant`` (as a multipart JSON text) is refused; ``tenant`` on agent
  PATCH is refused by ``AgentPatchSerializer``.
- content types: a JSON body is decoded once and a duplicate key's last value is the one every check reads
  (``"tenant": "acme", "tenant": "globex"`` is refused for globex); ``1e999`` is refused as not finite; deep
  nesting is bounded (``StorableJSONParser`` / ``CheckedJSONField``); a form's ``arguments`` text goes through
  ``json_loads_checked`` in ``toolhub.direct``.
- ``?tenant=globex`` and ``?tenant=nosuch`` on the catalogue answer the same 400; a forged cursor is a 404, a huge
  ``page_size`` is capped; a malformed ``?run=`` is a 400 naming the field.
- The browsable API's forms render no select of tenants or users (test_probe_2026_12_05_h); its raw-data inputs
  are left unescaped on purpose (what is submitted is what is stored).
"""

import json
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from tests.helpers import RequestCall
from tests.security_review.conftest import client_for
from toolhub.models import ToolCall

pytestmark = pytest.mark.django_db

FORM = "application/x-www-form-urlencoded"
HIDDEN = "ada\u202e@moc.emca\u200b"


def _planted(alice: User, request_call: RequestCall) -> ToolCall:
    """alice's call holding ``HIDDEN`` in its arguments (a model may write any text there)."""
    return request_call("export_file", {"name": HIDDEN}, alice, tenant="acme")


def test_browsable_api_writes_invisible_characters_out_and_json_keeps_them(
    alice: User, request_call: RequestCall
) -> None:
    """Found: the browsable API drew a call's ``\\u202e`` and ``\\u200b`` raw (the page reads a reversed address).
    Expect: the page shows them written out (``\\u202e``), the JSON answer holds them as stored."""
    call = _planted(alice, request_call)
    User.objects.filter(pk=alice.pk).update(is_staff=True)  # the browsable API takes a console session: staff's
    page = Client()
    page.force_login(alice)
    html = page.get(f"/api/v1/calls/{call.pk}/", HTTP_ACCEPT="text/html")
    assert html.status_code == 200 and "text/html" in html["Content-Type"]
    text = html.content.decode()
    assert "\u202e" not in text and "\u200b" not in text
    assert "ada\\u202e@moc.emca\\u200b" in text
    listing = page.get("/api/v1/calls/?format=api").content.decode()
    assert "\u202e" not in listing and "ada\\u202e@moc.emca\\u200b" in listing
    data: dict[str, Any] = client_for(alice).get(f"/api/v1/calls/{call.pk}/").json()
    assert data["arguments"]["name"] == HIDDEN


def test_a_body_over_the_upload_limit_is_refused_in_the_api_shape_naming_the_limit(alice: User) -> None:
    """Found: a JSON body of 10 MB answered ``{"error": "Bad Request (400)"}`` (Django's refusal through DRF's
    ``bad_request``): not the API's ``{"detail": ...}`` shape, and the client is not told why nor the limit; a
    form body of the same size answered a "Multipart form parse error" for a form that was not multipart.
    Expect: 413 ``{"detail": ...}`` naming ``DATA_UPLOAD_MAX_MEMORY_SIZE`` and its value, for JSON and form bodies;
    nothing is recorded."""
    client = client_for(alice)
    limit = f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}"
    big = json.dumps({"tool": "export_file", "arguments": {"name": "x" * 10_000_000}})
    answers = [
        client.post("/api/v1/calls/", big, content_type="application/json"),
        client.post("/api/v1/calls/", f"tool=export_file&name={'x' * 3_000_000}", content_type=FORM),
    ]
    for answer in answers:
        assert answer.status_code == 413, answer.content[:200]
        detail = answer.json()["detail"]
        assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in detail and limit in detail
    assert not ToolCall.objects.exists()
    schema = client.get("/api/schema/?format=json").json()
    assert "413" in schema["paths"]["/api/v1/calls/"]["post"]["responses"]
