"""Review of 2026-12-05 (i): the day's secret-scrubbing, approval-rule, subagent and adapter fixes (e811f6c..df5120f).

Each test fails on the reviewed code (main at df5120f) and states what was found and what is expected.

Checked and found holding (no test here): ``_RunningScopes``' union is an operator-side oracle only — no log
record reaches a tenant (no handler stores records with a call, a run or an API answer), so one tenant's line
showing ``[secret]`` where another's value occurs tells no tenant anything; a call's own thread scrubs with its
own scope only, never the union; ``logging.LoggerAdapter``, ``logging.captureWarnings`` and Celery's stdout
redirect (``LoggingProxy``) all create records through ``Logger.makeRecord`` and the factory; ``%r`` of a str,
bytes or container is matched by the repr/bytes-repr forms; ``MIN_SECRET_LENGTH`` (4) and transformed values
(case, Unicode normalisation, stripped) are documented limits; progress messages, suspension reasons and
payloads, ``ToolResult.error``, artifact names and code-rule reasons are scrubbed with the call's scrubber;
``recorded_call_verdict`` judges an edit with the same rule path; the database rule source cannot be made to
raise by a model (``_compare`` holds on ``TypeError``, ``_normal`` keeps non-finite and unparsable values);
``_start_child`` refuses inner calls and ``_calling_run`` calls without a run; ``edited_arguments`` hands back
only an operator's edit, as ``displayed_arguments`` redacts it; ``offered_tools`` lists by
``visible_tool_names`` with ``tool_seen_by`` schemas; LangGraph's ``asked_arguments_hash`` is keyed like
``approval_hash`` (a caller cannot forge it); the API list filters (calls' ``run``/``status``, tools'
``enabled``, runs' and approvals' ``status``) are choice/UUID filters answering 400 on other values, and their
char filters only narrow an already tenant-scoped queryset.
"""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest, ApprovalRule
from tests.helpers import RequestCall
from toolhub import Param, Tool, registry
from toolhub.models import CallStatus
from toolhub.tools.presets import Secret

pytestmark = pytest.mark.django_db

API_KEY = "sk-live-review-i-8d3f1c7a2b9e"
KEY_SETTING = "REVIEW_I_VENDOR_KEY"
vendor_log = logging.getLogger("review_i.vendor")


def _logged(records: list[logging.LogRecord]) -> str:
    """Every record as a handler writes it: message, traceback, and its attributes (``extra=``), as JSON
    log formatters and error trackers ship them."""
    standard = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
    lines = []
    for record in records:
        extras = {key: value for key, value in record.__dict__.items() if key not in standard}
        lines.append(f"{logging.Formatter().format(record)} {extras!r}")
    return "\n".join(lines)


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> "list[logging.LogRecord]":
    handler = _Keep()
    vendor_log.addHandler(handler)
    vendor_log.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        vendor_log.removeHandler(handler)


# --- 361d263: a thread the tool started goes on logging after the call's scope ended ---------------------------

#: The vendor SDK's connection pool: module-level, as SDK clients keep theirs (not closed with the call).
_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="review-i-vendor")
_upstream_answers = threading.Event()


def _slow_charge(amount: int, api_key: str) -> None:
    """The SDK's request: it waits for the upstream's answer, then logs its request line (as urllib3 does)."""
    _upstream_answers.wait(10)
    vendor_log.warning("POST /v1/charges amount=%s key=%s: 504 Gateway Timeout", amount, api_key)


def _charge(amount: Annotated[int, Param("How much.")], api_key: str) -> str:
    """Charge through the vendor's SDK, which sends the request on its pool."""
    _POOL.submit(_slow_charge, amount, api_key).result()
    return "charged"


def test_a_thread_of_a_timed_out_call_logs_the_key_in_clear_once_the_call_has_ended(
    request_call: RequestCall, alice: User, settings: object, kept: list[logging.LogRecord]
) -> None:
    """Found: ``toolhub/tools/secrets.py`` ``SecretScrubber.scope`` removes its scrubber from ``_running`` as soon as
    the block ends, and ``_scrubbing_factory`` scrubs a record of a thread without a call's context only with the
    scopes running at that instant. A tool whose request runs on its SDK's pool thread and times out (``timeout=``,
    ``ToolTimeoutError``) leaves that thread working: when the upstream answers, the SDK's request line is logged
    with the API key in clear, as it was before 361d263 — the timeout being exactly when a tool's threads outlive
    its call. Attacker: none needed; the key reaches the log store (and whoever reads it) on a slow upstream.
    Expect: a scope's secrets keep scrubbing records of threads without a context for a while after it ends
    (threads the call started may still be working for it); they are redacted, never shown.
    """
    settings.REVIEW_I_VENDOR_KEY = API_KEY  # type: ignore[attr-defined]
    _upstream_answers.clear()
    tool = Tool.from_function(
        _charge, name="review_i_charge", risk="low", timeout=0.5, presets={"api_key": Secret(KEY_SETTING)}
    )
    with registry.temporarily(tool):
        call = request_call("review_i_charge", {"amount": 5}, alice, tenant="acme")
    assert call.status == CallStatus.FAILED, call.status
    _upstream_answers.set()
    _POOL.submit(lambda: None).result(10)  # the pool's thread has logged its request line

    shown = _logged(kept)
    assert "POST /v1/charges amount=5" in shown
    assert API_KEY not in shown, "the SDK's request line is logged with the key after the call timed out"


# --- 361d263 and before: a record's ``extra=`` attributes are never scrubbed ------------------------------------


def _charge_logging_extras(amount: Annotated[int, Param("How much.")], api_key: str) -> str:
    """Charge; the SDK logs its request structured (``extra=``), as structured-logging SDKs do."""
    vendor_log.info("request sent", extra={"http_headers": {"Authorization": f"Bearer {api_key}"}, "amount": amount})
    return "charged"


def test_a_tools_structured_log_record_keeps_the_key_in_its_extra_attributes(
    request_call: RequestCall, alice: User, settings: object, kept: list[logging.LogRecord]
) -> None:
    """Found: ``toolhub/tools/secrets.py`` scrubs a record in the log record factory (``_scrubbing_factory``),
    which ``logging.Logger.makeRecord`` calls *before* it copies ``extra=`` onto the record, and
    ``SecretScrubber.log_record`` rewrites only the message, traceback and stack. A tool (or its SDK) logging
    structured, ``log.info("request sent", extra={"http_headers": {"Authorization": f"Bearer {key}"}})``, hands
    every handler that ships a record's attributes (JSON formatters, error trackers' "extra" data) the API key
    in clear, on the call's own thread, while the call runs — where the module promises "log records created
    while the call runs, whatever the logger" are scrubbed.
    Expect: the record's own attributes set from ``extra=`` are scrubbed like its message.
    """
    settings.REVIEW_I_VENDOR_KEY = API_KEY  # type: ignore[attr-defined]
    tool = Tool.from_function(
        _charge_logging_extras, name="review_i_charge_extras", risk="low", presets={"api_key": Secret(KEY_SETTING)}
    )
    with registry.temporarily(tool):
        call = request_call("review_i_charge_extras", {"amount": 5}, alice, tenant="acme")
    assert call.status == CallStatus.SUCCEEDED, call.error

    shown = _logged(kept)
    assert "request sent" in shown and "Authorization" in shown
    assert API_KEY not in shown, "the record's extra attributes carry the key"


# --- ea32743: a code rule that raises holds the call with fewer approvals than the operators' rules ask ----------


def _bulk_order(
    item: Annotated[str, Param("The item.")],
    total: Annotated[float, Param("The order's total.")],
    quantity: Annotated[int, Param("How many.")],
) -> str:
    """Order items."""
    return "ordered"


def _expensive_per_unit(arguments: Any, ctx: Any) -> str | None:
    """The developer's rule: a unit price above 500 needs a look."""
    return "a unit price above 500" if arguments["total"] / arguments["quantity"] > 500 else None


def test_a_code_rule_made_to_raise_holds_the_call_for_one_approver_where_the_operators_rule_asks_two(
    request_call: RequestCall, alice: User
) -> None:
    """Found: ``toolhub/policy.py`` ``approval_verdict`` returns ``RULE_FAILED_REASON`` with the risk's minimum
    approvals as soon as the tool's code rule raises, before the rule sources are read. An operator's database rule
    for the tool asking two approvers (``ApprovalRule.required_approvals=2``: every order of this tool) applies to a
    call whose code rule returns nothing, yet a model that picks arguments making the rule raise (``quantity=0``:
    ``ZeroDivisionError`` in the developer's unit-price rule) has its call held for one approver. Before ea32743
    such a call failed (500); now it is a way around the operators' second pair of eyes. Attacker: the model (a
    prompt injection) choosing the arguments.
    Expect: a call held because its code rule failed is held on terms at least as strict as the operators' rules
    that match it (their required approvals, their timeout), as a call whose rule matched nothing would be.
    """
    order = Tool.from_function(_bulk_order, name="review_i_order", risk="low", needs_approval=_expensive_per_unit)
    ApprovalRule.objects.create(name="orders: two approvers", tool_name="review_i_order", required_approvals=2)
    with registry.temporarily(order):
        ordinary = request_call("review_i_order", {"item": "chairs", "total": 100, "quantity": 1}, alice)
        failing = request_call("review_i_order", {"item": "chairs", "total": 100, "quantity": 0}, alice)

    assert ordinary.status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(call=ordinary).required_approvals == 2
    assert failing.status == CallStatus.PENDING_APPROVAL
    held = ApprovalRequest.objects.get(call=failing)
    assert held.required_approvals >= 2, f"held for {held.required_approvals} approver(s): {held.reason!r}"
