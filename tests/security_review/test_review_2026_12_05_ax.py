"""Review of 2026-12-05 (ax): output encoding of what operators and auditors see (HTML, CSV, headers, e-mail).

Findings (fixed):

1. An artifact's download (``CallArtifactView``) wrote ``Content-Disposition: attachment; filename="<name>"`` by
   hand; a name outside Latin-1 (a model-chosen ``отчёт.html``, ``報告.svg``: tools name artifacts after their
   arguments, as the tenancy suite's ``export_file`` does) made Django MIME-encode the whole header value
   (``=?utf-8?b?...?=``), which is no disposition type: browsers parse it as no disposition and render the artifact
   inline, on the console's origin, with the operator's session (an HTML or SVG artifact runs its script). The
   header is now Django's ``content_disposition_header`` (``filename*=utf-8''...``), and the download also carries
   ``Content-Security-Policy: sandbox`` so an artifact never runs as the console even if a browser renders it.
   (Seen in Chromium headless: the old header rendered ``text/html`` and ran its script; the new one downloads.)
2. An artifact's stored media type is the tool's text, unchecked: one holding a line break (a tool passing the
   model's ``media_type`` on) made every download of it a 500 (``BadHeaderError``). A media type that is not
   ``type/subtype[; parameters]`` of printable ASCII is now served as ``application/octet-stream``.

Checked and found holding (no test here): every ``format_html``/``format_html_join`` in the console passes data
as arguments (never in the format string); ``admin_table`` renders through the template engine; no template uses
``|safe``, ``autoescape off`` or inline JSON; the approval desk's argument fields show their help text (a tool's
parameter descriptions) escaped, unlike Django's fieldset template, and no admin form takes help text from data;
the dashboard's SVG chart escapes tool names; the queue refresh script copies only cells the server rendered
escaped; the CSV export quotes cells starting with ``= + - @ TAB CR`` (``toolhub.exports._cell``) and the export's
file name is a timestamp; approval e-mails are plain text whose subject holds only a tool name (code or a
remote server's sanitised name), a risk and a tenant slug; webhook bodies are JSON.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import RequestCall
from tests.security_review.conftest import client_for
from toolhub import Tool, ToolResult, registry
from toolhub.models import CallStatus

pytestmark = pytest.mark.django_db

_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "media_type": {"type": "string"}},
    "required": ["name"],
}
_PAGE = "<html><body><script>document.title = 'pwned:' + document.cookie</script></body></html>"


def _save_page(arguments: dict[str, Any]) -> ToolResult:
    """Stores the model's page under the model's name and media type (as a generic "save a file" tool does)."""
    return ToolResult.artifact(_PAGE, name=arguments["name"], media_type=arguments.get("media_type", "text/html"))


SAVE_PAGE = Tool.create("review_ax_save_page", "Save a page the model wrote.", _SCHEMA, _save_page, risk="low")


def _download(request_call: RequestCall, alice: User, arguments: dict[str, Any]) -> Any:
    with registry.temporarily(SAVE_PAGE):
        call = request_call("review_ax_save_page", arguments, alice, tenant="acme")
    assert call.status == CallStatus.SUCCEEDED, call.error
    artifact = call.artifacts.get()
    return client_for(alice).get(f"/api/v1/calls/{call.pk}/artifacts/{artifact.pk}/")


def test_an_artifact_named_outside_latin1_is_still_an_attachment(request_call: RequestCall, alice: User) -> None:
    """Found: the model names the page ``отчёт.html``; the download's header came out as ``=?utf-8?b?...?=``
    (Django MIME-encodes a header value it cannot write in Latin-1), no disposition type, so the browser shows the
    HTML inline on the console's origin and its script runs with the viewer's session.
    Expect: ``attachment`` with the name as RFC 6266's ``filename*``, and a sandboxing CSP on the download.
    """
    answer = _download(request_call, alice, {"name": "отчёт.html"})

    assert answer.status_code == 200
    disposition = answer["Content-Disposition"]
    assert disposition.startswith("attachment;"), disposition
    assert "filename*=utf-8''" in disposition and "%D0%BE" in disposition, disposition
    assert "sandbox" in answer.get("Content-Security-Policy", ""), answer.headers


def test_an_artifact_with_a_line_break_in_its_media_type_downloads(request_call: RequestCall, alice: User) -> None:
    """Found: the tool passes the model's media type on; ``text/html\\r\\nRefresh: 0`` was stored as is, and every
    download of the artifact answered 500 (``BadHeaderError: Header values can't contain newlines``).
    Expect: the artifact downloads, typed ``application/octet-stream``, and no header is added.
    """
    answer = _download(request_call, alice, {"name": "page.html", "media_type": "text/html\r\nRefresh: 0"})

    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/octet-stream"
    assert "Refresh" not in answer.headers
    assert answer["Content-Disposition"].startswith("attachment;")
