"""Review 2026-12-06 aw: output injection where toolhub writes out text a model, a member or a remote server chose.

Findings:
1. The approval e-mail's body wrote a code rule's reason (which rules build from the model's arguments, "first
   payment to <iban>") as it was: a line break in an argument forged whole lines of the e-mail, such as a second
   "Open it on the approval desk ...: <link>" pointing anywhere, in a message every approver receives from toolhub.

   Fixed in the shared text helpers: ``toolhub.visible.visible_line`` (``visible_text`` with line breaks written out)
   writes every value of the e-mail, and its subject, on one line.

Checked and holds (probes against the code as found, not kept as tests):
- Templates and admin code: no ``|safe``, ``autoescape off``, ``json_script``, ``SafeString(...)`` of data; the two
  ``mark_safe`` calls wrap template output (``admin_table``) and ``visible_text`` of already-safe HTML; every
  ``format_html`` gets raw values (diffs, JSON, reasons, comments, risk classes, artifact names); the dashboard's SVG
  escapes tool names. A held call of a tool whose schema's descriptions, enum values, arguments, description and
  reason are ``<img onerror>``/``</script><script>`` renders escaped on the approval desk (the per-parameter edit
  fields' help text is drawn with ``{{ field.help_text }}``, escaped, not Django's ``|safe`` form templates) and on
  the call's page. Probe 03-e's crawl (every changelist, change, history and delete page) and review 06-a cover the
  rest. ``queue-refresh.js`` copies only server-rendered age cells of the same page (no data attribute to HTML).
- ``javascript:`` links: URL fields (remote MCP server, model provider) are shown as links only with a safe scheme
  (Django 5.2.19's ``display_for_field``) and URLField validation admits http(s)/ftp(s) only; other links are reversed.
- E-mail headers: the only e-mail is the approval one; subject parts are tool names (code, or remote names reduced to
  ``[A-Za-z0-9_-]``), risk and tenant slug; Django refuses CR/LF in headers (``BadHeaderError``) anyway.
- CSV: every string cell starting with ``= + - @`` TAB or CR gets a leading quote (``exports._cell``), arguments are
  JSON (``{``); JSON Lines splice only re-serialized JSON; webhooks and MCP answers are built with ``json.dumps``/the
  SDK's models, never by string formatting.
- Logs: django-axes masks the login name (``AXES_SENSITIVE_PARAMETERS``) in its WARNING lines; toolhub's own log
  lines quote names and errors with ``%r`` or log ids (remote names, blackboard names, outbound hosts); Django 5.2.19
  escapes request paths in ``django.request`` lines; ``verify_audit`` prints numbers only and the offline verifier
  quotes values from the file with ``repr``.
- Content-Disposition: artifact downloads and trail exports go through ``download_filename`` and Django's
  ``content_disposition_header``; the calls export's name is a timestamp and a format checked against a list.
"""

from collections.abc import Mapping
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.core import mail

from tests.helpers import RequestCall
from toolhub import Param, Tool, ToolContext
from toolhub.models import CallStatus
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

FORGED = "Open it on the approval desk to read the arguments and decide: https://evil.example/desk"


def _wire(iban: Annotated[str, Param("The account to pay.")], amount: Annotated[int, Param("How much.")]) -> str:
    """Pay an account."""
    return "paid"


def _first_payment(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
    """A code rule explaining itself with the request, as the README's example does."""
    return f"first payment to {arguments['iban']}"


def test_a_line_break_in_a_rule_reason_forges_no_line_of_the_approval_email(
    request_call: RequestCall, alice: User, operator: User
) -> None:
    """Found: ``approvals/notifications.py`` wrote ``Why: {request.reason}`` as it was; the reason of a code rule
    quotes the model's arguments, so an ``iban`` of ``"DE89\\n\\nOpen it on the approval desk ...: https://evil"``
    put a second, forged link line into the e-mail every approver of the tenant receives.
    Expect: every field of the e-mail stays on its one line (line breaks and other controls written out), so the
    body holds exactly one "Open it on the approval desk" line, the console's own.
    """
    wire = Tool.from_function(_wire, name="review_aw_wire", risk="low", needs_approval=_first_payment)
    iban = f"DE89370400440532013000\r\n\r\n{FORGED}\n"
    with registry.temporarily(wire):
        call = request_call("review_aw_wire", {"iban": iban, "amount": 5}, alice, tenant="acme")

    assert call.status == CallStatus.PENDING_APPROVAL
    assert mail.outbox, "the approvers are written to"
    for message in mail.outbox:
        lines = str(message.body).splitlines()
        desk_lines = [line for line in lines if line.startswith("Open it on the approval desk")]
        assert len(desk_lines) == 1, desk_lines
        assert "evil.example" not in desk_lines[0]
        why = [line for line in lines if line.startswith("Why:")]
        assert len(why) == 1 and "evil.example" in why[0], lines
