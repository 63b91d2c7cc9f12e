"""Probe of 2026-12-05 (a): secrets and sensitive arguments outside the audit trail and the admin pages.

Where a ``Secret`` preset, a remote server's credential or a ``sensitive=`` argument travels once a call is
asked for: the broker's messages, the processes' logs, what the tool outputs (results, artifacts), approval
e-mails and webhooks, the run's messages, the refusals the model and the API client read.

Each test fails on the code as probed; its docstring says what was found ("Found: ...") and what is expected
("Expect: ..."). The test-only tools are defined here and registered with ``registry.temporarily``; the remote
MCP server is the tests' own (``tests/mcpclient/fake_server.py``), subclassed here to echo its caller's header.

Tried and found holding (no test here): Celery messages carry ids only (``execute_tool_call_task(call_id,
hint=[tool, tenant, run, attempt])``, ``advance_run_task(run_id)``, the approvals' tasks take row ids) and every
task has ``ignore_result=True`` (no result backend holds a result); a tool's own exception, its ``ToolError``,
``ToolResult.error``, its ``logger.info(..., exc_info=True)`` failure line and a log line it writes on the
calling thread (``SecretScrubber.scope``), including the helper thread ``call_with_timeout`` starts (it copies
the context); progress notes, a suspension's reason and payload, a UTF-8 text artifact's name and content; a
validator quoting a sensitive value in a ``ValueError``, a too-long string under a sensitive mapping key, a
wrongly typed value under one (``[secret]`` in the refusal); pydantic errors are built with
``include_input=False``; JSON syntax errors quote no text; a refused call's raw arguments and the run's messages
for a known tool (``Tool.withheld``, misspelt parameter names included); the approval e-mail carries no
arguments; the CSV/JSONL export withholds sensitive and undeclared names; an OpenAI-compatible endpoint's key in
its answers; a remote server's credential echoed in a result or an error (stored scrubbed); the idempotency
fingerprint (a plain SHA-256 of the request) is stored but never shown.
"""

import asyncio
import json
import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import mcp_types as types
import pytest
from django.contrib.auth.models import User
from django.core import mail
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from pydantic import AfterValidator
from rest_framework.test import APIClient

from agents_app.services import agent_create, run_start
from approvals.models import ApprovalRequest, WebhookDelivery
from approvals.services import approval_approve
from tests.helpers import RequestCall
from tests.mcpclient.fake_server import FakeCrm, serving
from toolhub import Param, Tool, ToolContext, ToolResult, registry
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import CallStatus, Tenant, ToolCall, ToolCallArtifact
from toolhub.tools.presets import Secret

pytestmark = pytest.mark.django_db

PIN = "4821-7730"
CARD = "4111111111111111"
IBAN = "DE89370400440532013000"
API_KEY = "sk-live-probe-a-5c1e8f2d9b7a"
KEY_SETTING = "PROBE_A_VENDOR_KEY"

vendor_log = logging.getLogger("probe_a.vendor")


def client_of(user: User) -> APIClient:
    """An API client of ``user`` that answers a server error as a 500 instead of raising it in the test."""
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user)
    return client


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record captured, formatted as a log handler writes it (message and traceback)."""
    return "\n".join(logging.Formatter().format(record) for record in caplog.records)


# --- a door tool whose schema admits names it does not declare (Tool.create with a JSON Schema) ---------------

DOOR_SCHEMA = {
    "type": "object",
    "properties": {
        "door": {"type": "string", "description": "The door."},
        "pin": {"type": "string", "description": "The door's PIN."},
    },
    "required": ["door"],
}


def _open_door(arguments: dict[str, Any]) -> str:
    """Opens the door and reports what it was asked (a forwarding tool repeats its request)."""
    return f"door opened with {arguments}"


def _door_needs_operator(arguments: Mapping[str, Any], ctx: ToolContext) -> str:
    """A code rule that explains itself with the request, as rules do ("first payment to <iban>")."""
    return f"doors need an operator: {dict(arguments)}"


def test_a_pin_sent_under_an_undeclared_name_is_stored_in_clear_in_the_result(
    request_call: RequestCall, alice: User
) -> None:
    """Found: the model misspells ``pin`` as ``PIN`` for a tool whose schema admits other names. The stored
    arguments withhold ``PIN`` (``Tool.withheld``: for a tool with sensitive parameters, every undeclared name),
    but the worker's scrubber is built from ``tool.sensitive`` only (``toolhub/tools/secrets.py``
    ``SecretScrubber.for_call``: ``sensitive_values(arguments, tool.sensitive, ...)``). A tool repeating its
    request has the PIN stored in clear in ``ToolCall.result``: the API, MCP, the run's messages (what the model
    reads back). An external tool's posted result is scrubbed of withheld names (``waiting._sensitive_scrubber``);
    a tool that runs is not.
    Expect: the PIN is in no stored result and no API answer; ``[secret]`` stands in its place.
    """
    door = Tool.create("probe_a_door", "Open a door.", DOOR_SCHEMA, _open_door, risk="low", sensitive=("pin",))
    with registry.temporarily(door):
        call = request_call("probe_a_door", {"door": "D-7", "PIN": PIN}, alice, tenant="acme")
        answer = client_of(alice).get(f"/api/v1/calls/{call.id}/").json()

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert answer["arguments"]["PIN"] != PIN  # the arguments withhold it ...
    assert PIN not in json.dumps(answer), f"... the result shows it: {answer['result']!r}"
    assert PIN not in str(call.result)


def test_a_pin_sent_under_an_undeclared_name_is_mailed_and_sent_to_the_webhook_in_the_approval_reason(
    request_call: RequestCall, alice: User, operator: User, settings: Any
) -> None:
    """Found: a code rule's reason is scrubbed of sensitive values before it is stored, mailed and sent to
    webhooks (``toolhub/policy.py`` ``approval_verdict``), but with ``tool.sensitive`` only: the value of an
    undeclared name (a misspelt ``PIN``, withheld from the stored arguments by ``Tool.withheld``) stays. The
    approval e-mail ("Why: ...") to every approver and the ``approval.requested`` webhook payload carry the PIN
    in clear (as do ``ApprovalRequest.reason`` and the ``call.pending_approval`` event).
    Expect: the reason is scrubbed of every withheld value (``Tool.withheld``), as refusals are
    (``toolhub.arguments.without_sensitive_values``).
    """
    settings.TOOLHUB = {**getattr(settings, "TOOLHUB", {}), "WEBHOOK_URL": "http://127.0.0.1:9/hook"}
    door = Tool.create(
        "probe_a_door_held",
        "Open a door.",
        DOOR_SCHEMA,
        _open_door,
        risk="low",
        sensitive=("pin",),
        needs_approval=_door_needs_operator,
    )
    with registry.temporarily(door):
        call = request_call("probe_a_door_held", {"door": "D-7", "PIN": PIN}, alice, tenant="acme")

    assert call.status == CallStatus.PENDING_APPROVAL
    request = ApprovalRequest.objects.get(call=call)
    shown = {
        "e-mail": "\n".join(str(message.body) for message in mail.outbox),
        "webhook": json.dumps(list(WebhookDelivery.objects.values_list("payload", flat=True))),
        "reason": request.reason,
    }
    assert mail.outbox and WebhookDelivery.objects.exists()
    assert [where for where, text in shown.items() if PIN in text] == []


# --- user code the web process runs before any scrubber: approval rules, validators ---------------------------


def _card_rule(arguments: Mapping[str, Any], ctx: ToolContext) -> str | None:
    """Hold large amounts, and cards of one issuer (its BIN read as a number: a malformed card raises)."""
    if arguments["amount"] > 1000:
        return "amounts above 1000 need an operator"
    return "issuer 4821 needs an operator" if int(arguments["pin"]) == 4821 else None


def _pay_with_pin(
    account: Annotated[str, Param("The account.")],
    amount: Annotated[int, Param("How much.")],
    pin: Annotated[str, Param("The card's PIN.")],
) -> str:
    """Pay from an account."""
    return "paid"


def test_an_approval_rule_failing_on_a_sensitive_value_has_it_written_to_the_web_processs_log(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: ``toolhub/policy.py`` ``approval_verdict`` calls the tool's ``needs_approval`` rule in the process
    that asks for the call (web, MCP, the agent worker), outside any ``SecretScrubber.scope``. A rule that
    fails on the value (``int("4821-7730")``: Python quotes it) escapes ``tool_call_request``: the REST call
    answers 500 and Django's ``django.request`` logger writes the traceback at ERROR, ``ValueError: invalid
    literal for int() with base 10: '4821-7730'`` (in an agent run, Celery logs it as ``advance_run_task``
    raising). The README promises a tool's sensitive values are replaced in "every log line".
    Expect: no log line holds the PIN (the rule runs in the scope of a scrubber of the call's withheld values,
    or its failure is caught, logged scrubbed, and the call held for a person as ``recorded_call_verdict`` does).
    """
    pay = Tool.from_function(
        _pay_with_pin, name="probe_a_pay_pin", risk="low", sensitive=("pin",), needs_approval=_card_rule
    )
    caplog.set_level(logging.INFO)
    with registry.temporarily(pay):
        answer = client_of(alice).post(
            "/api/v1/calls/",
            {"tool": "probe_a_pay_pin", "arguments": {"account": "A-1", "amount": 5, "pin": PIN}},
            format="json",
        )

    assert PIN not in logged(caplog), "the rule's failure is logged with the PIN"
    # A clear outcome: the call is held for a person, nothing ran, and the reason says why.
    assert answer.status_code < 500, answer.content
    call = ToolCall.objects.get(tool_name="probe_a_pay_pin")
    assert call.status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(call=call).reason == "the tool's approval rule failed on these arguments"


def test_an_approval_rule_failing_on_an_edited_call_has_the_sensitive_value_logged(
    request_call: RequestCall, alice: User, operator: User, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: an operator edits a held call (the amount); ``toolhub/policy.py`` ``recorded_call_verdict`` runs
    the rule again, it fails on the PIN, and ``logger.exception("The approval rules of %s failed on recorded
    call %s ...")`` writes the traceback, PIN included, at ERROR. The same line is written by a worker that finds
    an approved call's tool changed (``waiting.tool_call_require_reapproval``). No scrubber is active there.
    Expect: the failure is logged without the PIN (formatted and scrubbed of the call's withheld values, or
    logged by exception type only).
    """
    pay = Tool.from_function(
        _pay_with_pin, name="probe_a_pay_pin_edit", risk="low", sensitive=("pin",), needs_approval=_card_rule
    )
    with registry.temporarily(pay):
        call = request_call(
            "probe_a_pay_pin_edit", {"account": "A-1", "amount": 5000, "pin": PIN}, alice, tenant="acme"
        )
        assert call.status == CallStatus.PENDING_APPROVAL
        request = ApprovalRequest.objects.get(call=call)
        caplog.set_level(logging.INFO)
        approval_approve(request_id=request.pk, user=operator, arguments={"amount": 50}, expected_round=1)

    assert "failed on recorded call" in caplog.text
    assert PIN not in logged(caplog), "the edited call's rule failure is logged with the PIN"


BRANDS = {"4000": "visa"}


def _known_brand(card: str) -> str:
    """A validator that looks the card's brand up (a dict: a card it does not know raises ``KeyError``)."""
    return card if BRANDS[card] else card


def _pay_by_card(
    card: Annotated[str, AfterValidator(_known_brand), Param("The card number.")],
    amount: Annotated[int, Param("How much.")],
) -> str:
    """Pay by card."""
    return "paid"


def test_a_validator_raising_a_key_error_has_the_card_number_written_to_the_web_processs_log(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: pydantic turns only ``ValueError``/``AssertionError`` raised by a validator into a
    ``ValidationError``; anything else (a ``KeyError`` from a lookup, which quotes its key) escapes
    ``toolhub/arguments.py`` ``validate_arguments`` (``except ValidationError``) and ``tool_call_request``: the
    REST call answers 500 and ``django.request`` logs ``KeyError: '4111111111111111'``. A validator's
    ``ValueError`` quoting the card is scrubbed (``_refused``); this one reaches the log whole.
    Expect: no log line holds the card number (the exception refused as invalid arguments with a scrubbed
    message, or at least logged scrubbed of the call's withheld values).
    """
    pay = Tool.from_function(_pay_by_card, name="probe_a_pay_card", risk="low", sensitive=("card",))
    caplog.set_level(logging.INFO)
    with registry.temporarily(pay):
        answer = client_of(alice).post(
            "/api/v1/calls/", {"tool": "probe_a_pay_card", "arguments": {"card": CARD, "amount": 5}}, format="json"
        )

    assert CARD not in logged(caplog), "the validator's failure is logged with the card number"
    # A clear outcome: the arguments are refused (nothing ran), the message names the parameter, not the card.
    assert answer.status_code < 500, answer.content
    call = ToolCall.objects.get(tool_name="probe_a_pay_card")
    assert call.status == CallStatus.INVALID
    assert "- card: its validator failed: KeyError: '[secret]'" in call.error, call.error
    assert CARD not in answer.content.decode()


# --- refusals ---------------------------------------------------------------------------------------------------


def _split_payment(
    payments: Annotated[dict[str, str], Param("Amount per IBAN.")], memo: Annotated[str, Param("A memo.")]
) -> str:
    """Split a payment over several accounts."""
    return "split"


def test_a_nul_in_a_sensitive_mappings_value_has_its_iban_key_quoted_in_the_refusal(
    request_call: RequestCall, alice: User
) -> None:
    """Found: a sensitive mapping keyed by IBAN (its keys count as its values, README) with a NUL character in
    one amount is refused by ``toolhub/arguments.py`` ``parse_arguments`` through ``_refusal`` (kind STORAGE),
    whose message names where the NUL is, ``payments.DE89370400440532013000 contains a NUL character``: the
    parser knows no tool, so no scrubber runs. The IBAN is in ``ToolCall.error`` (API, MCP, the run's messages,
    the CSV export's ``error`` column) and the ``call.invalid`` event. The other refusals of the same arguments
    say ``payments.[secret]`` (a too-long string, a wrong type).
    Expect: the refusal names the place as ``payments.[secret]`` (scrubbed of the tool's withheld values once
    the tool is known), never the IBAN.
    """
    split = Tool.from_function(_split_payment, name="probe_a_split", risk="low", sensitive=("payments",))
    with registry.temporarily(split):
        wrong_type = request_call("probe_a_split", {"payments": {IBAN: 5}, "memo": "m"}, alice, tenant="acme")
        with_nul = request_call("probe_a_split", {"payments": {IBAN: "10\x00"}, "memo": "m"}, alice, tenant="acme")
        answer = client_of(alice).get(f"/api/v1/calls/{with_nul.id}/").content.decode()
        # As a model's JSON text: the NUL escaped (the decoder finds it, and the same refusal names the key).
        as_text = json.dumps({"payments": {IBAN: "10\x00"}, "memo": "m"})
        text_nul = request_call("probe_a_split", as_text, alice, tenant="acme")

    assert IBAN not in wrong_type.error and "payments.[secret]" in wrong_type.error  # as the other refusals do
    assert with_nul.status == CallStatus.INVALID
    assert IBAN not in with_nul.error, f"the refusal quotes the IBAN: {with_nul.error!r}"
    assert IBAN not in answer
    assert "payments.[secret] contains a NUL character" in with_nul.error, with_nul.error
    assert text_nul.status == CallStatus.INVALID
    assert IBAN not in text_nul.error and "payments.[secret]" in text_nul.error, text_nul.error


def _unlock(door: Annotated[str, Param("The door.")], pin: Annotated[str, Param("The door's PIN.")]) -> str:
    """Unlock a door."""
    return "unlocked"


def test_a_misspelt_tool_name_keeps_the_pin_in_the_runs_messages_and_the_calls_raw_arguments(
    alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Found: the model calls ``probe_a_unlock_door`` for ``probe_a_unlock`` (answered "Unknown tool ... Did
    you mean: probe_a_unlock?"). ``toolhub/audit.py`` ``redacted_arguments_text`` withholds only for a known
    tool with sensitive parameters, so for an unknown name the arguments are kept as sent: the PIN is in the
    run's messages (``agents_app/loop.py`` ``_kept_arguments``; ``GET /api/v1/runs/{id}/`` shows it to the run's
    readers) and the call's ``raw_arguments``. A tool no longer registered has every value withheld because
    which were sensitive is unknown (README); a name that matches no tool is the same unknown.
    Expect: for a name that is no tool, argument values are withheld (as for an unregistered tool), so the PIN
    is in no message, no API answer and no stored row.
    """
    unlock = Tool.from_function(_unlock, name="probe_a_unlock", risk="low", sensitive=("pin",))
    script = [
        {"tool_calls": [{"name": "probe_a_unlock_door", "arguments": {"door": "D-7", "pin": PIN}}]},
        {"content": "done"},
    ]
    with registry.temporarily(unlock):
        agent = agent_create(name="probe-a-doors", provider="scripted", tools=["probe_a_unlock"], script=script)
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=alice, input="open D-7, the PIN is on file")
        run.refresh_from_db()
        answer = client_of(alice).get(f"/api/v1/runs/{run.id}/").content.decode()

    call = ToolCall.objects.get(run_id=run.id)
    assert call.status == CallStatus.INVALID and call.error.startswith("Unknown tool 'probe_a_unlock_door'")
    shown = {"run messages": json.dumps(run.messages), "runs API": answer, "raw arguments": call.raw_arguments}
    assert [where for where, text in shown.items() if PIN in text] == []


# --- what the tool outputs while it runs ------------------------------------------------------------------------


def _charge_in_a_pool(amount: Annotated[int, Param("How much.")], api_key: str) -> str:
    """Charge, the HTTP client logging its requests from a thread pool (as SDKs that fan out do)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(vendor_log.warning, "POST /v1/charges amount=%s key=%s", amount, api_key).result()
    return "charged"


async def _charge_in_an_executor(amount: Annotated[int, Param("How much.")], api_key: str) -> str:
    """Charge, a blocking SDK call moved off the event loop with ``run_in_executor`` (it logs its request)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, vendor_log.warning, "POST /v1/charges amount=%s key=%s", amount, api_key)
    return "charged"


@pytest.mark.parametrize("charge", [_charge_in_a_pool, _charge_in_an_executor], ids=["thread-pool", "executor"])
def test_a_secret_logged_from_a_thread_the_tool_starts_is_written_in_clear(
    request_call: RequestCall, alice: User, caplog: pytest.LogCaptureFixture, settings: Any, charge: Any
) -> None:
    """Found: the README promises a ``Secret`` preset is scrubbed from "every log line written while the call
    runs". ``toolhub/tools/secrets.py`` ``SecretScrubber.scope`` finds the active scrubber in a context variable,
    which a thread the tool starts does not inherit (``ThreadPoolExecutor``; ``loop.run_in_executor``, unlike
    ``asyncio.to_thread``, copies no context). A request log line written by the tool's HTTP client from such a
    thread, during the call, carries the API key in clear (the same line on the calling thread reads
    ``[secret]``).
    Expect: no log line written while the call runs holds the key, whichever thread writes it (e.g. the record
    factory scrubs with every scrubber active in the process, not only the current context's).
    """
    settings.PROBE_A_VENDOR_KEY = API_KEY
    tool = Tool.from_function(charge, name="probe_a_charge", risk="low", presets={"api_key": Secret(KEY_SETTING)})
    caplog.set_level(logging.INFO)
    with registry.temporarily(tool):
        call = request_call("probe_a_charge", {"amount": 5}, alice, tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert "POST /v1/charges amount=5" in caplog.text
    assert API_KEY not in caplog.text, "the vendor's request line is logged with the key"


def _export_cards(card: Annotated[str, Param("The card number.")]) -> ToolResult:
    """Export the customer's cards as Unicode text (UTF-16, as spreadsheet programs write 'Unicode Text')."""
    text = f"name\tcard\r\nalice\t{card}\r\n"
    return ToolResult.artifact(text.encode("utf-16"), name="cards.txt", media_type="text/plain; charset=utf-16")


def test_a_text_artifact_in_utf16_is_stored_with_the_sensitive_value(request_call: RequestCall, alice: User) -> None:
    """Found: ``toolhub/tools/secrets.py`` ``SecretScrubber.artifact`` decodes every *text* artifact as UTF-8,
    whatever its ``charset``; a ``text/plain; charset=utf-16`` artifact holds the value as UTF-16 code units,
    which no text form matches, so it is stored (and downloadable) unchanged. A *binary* artifact holding the
    same UTF-16 bytes is refused (``holds_secret`` knows UTF-16): the text path knows less than the binary one.
    Expect: the stored artifact holds no copy of the value (scrubbed in its declared charset, or refused as a
    binary one holding it would be).
    """
    export = Tool.from_function(_export_cards, name="probe_a_export", risk="low", sensitive=("card",))
    with registry.temporarily(export):
        call = request_call("probe_a_export", {"card": CARD}, alice, tenant="acme")

    stored = ToolCallArtifact.objects.filter(call=call).first()
    if stored is None:
        assert call.status == CallStatus.FAILED  # refused, like a binary artifact holding it: nothing stored
        return
    content = bytes(stored.content)
    assert CARD.encode("utf-16-le") not in content, "the card number is stored in the artifact (UTF-16)"


# --- a remote MCP server's credential ---------------------------------------------------------------------------

REMOTE_TOKEN = "tok-acme-probe-a-7f3e9a1b2c4d"


class _CredentialEchoingCrm(FakeCrm):
    """Refuses every call with an error that repeats the caller's ``Authorization`` header (an auth layer's
    "credential ... may not read ...")."""

    def server(self) -> Server[Any]:
        fake = self

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult.model_validate(
                {
                    "tools": [
                        {
                            "name": "lookup_customer",
                            "description": fake.description,
                            "inputSchema": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
                        }
                    ]
                }
            )

        async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
            raise MCPError(-32001, f"credential {ctx.request.headers.get('authorization')} may not read customers")

        return Server("probe-a-crm", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.fixture
def echoing_crm(tenant: Tenant, operator: User, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with serving(_CredentialEchoingCrm()) as url:
        monkeypatch.setenv("PROBE_A_CRM_TOKEN", REMOTE_TOKEN)
        server = RemoteMcpServer.objects.create(name="crm", url=url, risk="low")
        RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="PROBE_A_CRM_TOKEN")
        remote_server_sync(server=server, actor="operator:platform")
        row = RemoteMcpTool.objects.get(tool_name="crm__lookup_customer")
        remote_tool_accept(row=row, actor="operator:platform", user=operator)
        yield url


def test_a_remote_servers_error_echoing_the_tenants_credential_is_logged_in_clear(
    echoing_crm: str, alice: User, request_call: RequestCall, caplog: pytest.LogCaptureFixture
) -> None:
    """Found: the call's stored error reads ``Bearer [secret]`` (``provider._call_remote`` scrubs with
    ``credential_scrubber``), but ``toolhub/mcp_client/remote.py`` ``_run`` first writes ``logger.warning("MCP
    server %r at %s failed: %r", name, url, first)`` with the server's error as it came, and the call's log
    scope (``SecretScrubber.for_call``: presets and sensitive arguments) does not know the credential: the
    tenant's token is in the worker's log at WARNING, the default level. The README sends "the URL and the
    detail" of a remote failure to the server log on purpose; the credential itself is the remote tool's secret,
    which for a ``Secret`` preset no log line written while the call runs may hold.
    Expect: no log line holds the token (the detail logged after ``credential_scrubber``, or the credential
    added to the call's log scope while the remote call runs).
    """
    caplog.set_level(logging.INFO)
    call = request_call("crm__lookup_customer", {"customer_id": "c-1"}, alice, tenant="acme")

    assert call.status == CallStatus.FAILED and REMOTE_TOKEN not in call.error  # stored scrubbed
    assert "may not read customers" in caplog.text
    assert REMOTE_TOKEN not in caplog.text, "the tenant's credential is in the log"
