"""Review of the REST API surface (2026-12-05, df): anonymous, a plain tenant-A member, tenant-A staff.

Findings (each a test below, failing on the code as found):

1. The browsable API (``?format=api`` / ``Accept: text/html``) drew values raw: a bidi override or a zero-width
   space in a call's arguments read as something else on the page. Its response panel now goes through
   ``toolhub.visible`` (``toolhub.api.renderers.VisibleBrowsableAPIRenderer``, the default renderer and the
   catalogue's), as the admin does; JSON answers keep the characters as stored.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.helpers import RequestCall
from tests.security_review.conftest import client_for
from toolhub.models import ToolCall

pytestmark = pytest.mark.django_db

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
