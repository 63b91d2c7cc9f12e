"""Review of 2026-12-05 (f): subagent lifetime and budgets, secret scrubbing (8777b8f..1949810).

Each test fails on the reviewed code (main at 1949810) and states what was found and what is expected.

Checked and found holding (no test here): the sweeper's ``Q(suspension__isnull=True) |
Q(suspension__expires__isnull=True)`` expires external and ordinary suspended calls and leaves ``expires=False``
ones alone on SQLite and PostgreSQL alike (``tests/suspend``, probe b); a child's end never retryable and
``run_retry`` refusing an old retryable child; a subagent tool called by a REST or MCP direct call (no run id:
"A subagent can only be called by an agent run."); the probes' own cases (probe a #1-#10, probe b #1-#4).
"""

import logging
import threading
from collections.abc import Mapping
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import AfterValidator
from rest_framework.test import APIClient

from agents_app.agentic import _ChargedToRun
from agents_app.models import AgentRun, RunStatus
from agents_app.models_adapters.base import ModelToolCall, ModelTurn
from agents_app.services import agent_create
from tests.helpers import RequestCall
from toolhub import Param, Tool, ToolResult, policy, registry
from toolhub.exceptions import ModelError
from toolhub.models import CallKind, CallStatus, ToolCall, ToolCallArtifact
from toolhub.tools.secrets import SecretScrubber

pytestmark = pytest.mark.django_db

PIN = "4821-7730"
CARD = "4111111111111111"


def client_of(user: User) -> APIClient:
    """An API client of ``user`` that answers a server error as a 500 instead of raising it in the test."""
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user)
    return client


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record captured, formatted as a log handler writes it (message and traceback)."""
    return "\n".join(logging.Formatter().format(record) for record in caplog.records)


# --- ea32743: only the code rule's failure is held; a rule source's still fails the request ------------------


def _pay(account: Annotated[str, Param("The account.")], pin: Annotated[str, Param("The card's PIN.")]) -> str:
    """Pay from an account."""
    return "paid"


def test_a_rule_source_failing_on_a_new_call_answers_500_and_logs_the_pin(
    alice: User, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``toolhub/policy.py`` ``approval_verdict`` catches and scrubs a failing *code* rule only; the loop
    over ``_rule_sources`` (``register_approval_rule_source``, a public hook) is unguarded. A source that fails on
    a sensitive value (``int("4821-7730")``) escapes ``tool_call_request``: ``POST /api/v1/calls/`` answers 500
    and ``django.request`` logs ``ValueError: invalid literal for int() with base 10: '4821-7730'``. The same
    failure on a recorded call (``recorded_call_verdict``) is held and logged scrubbed.
    Expect: a failing rule source holds the call for a person (``RULE_FAILED_REASON``) and its traceback is
    logged scrubbed of the call's withheld values, as for a code rule.
    """

    def source(tool: Tool, risk: str, arguments: Mapping[str, Any], principal: Any) -> None:
        if tool.name == "review_f_pay":
            int(arguments["pin"])  # a site's rule reading the PIN as a number

    monkeypatch.setattr(policy, "_rule_sources", [*policy._rule_sources, source])
    pay = Tool.from_function(_pay, name="review_f_pay", risk="low", sensitive=("pin",))
    caplog.set_level(logging.INFO)
    with registry.temporarily(pay):
        answer = client_of(alice).post(
            "/api/v1/calls/", {"tool": "review_f_pay", "arguments": {"account": "A-1", "pin": PIN}}, format="json"
        )

    assert PIN not in logged(caplog), "the rule source's failure is logged with the PIN"
    assert answer.status_code < 500, answer.status_code
    call = ToolCall.objects.get(tool_name="review_f_pay")
    assert call.status == CallStatus.PENDING_APPROVAL


# --- 64e4cc4: _parameter_of_validator names the first field using the validator, not the one that failed -----

COUNTRIES = {"DE": "Germany"}


def _known_country(iban: str) -> str:
    """A lookup of the IBAN's country (a ``KeyError`` for one it does not know)."""
    return iban if COUNTRIES[iban[:2]] else iban


IBAN = Annotated[str, AfterValidator(_known_country)]


def _transfer(source_iban: Annotated[IBAN, Param("From.")], target_iban: Annotated[IBAN, Param("To.")]) -> str:
    """Transfer between two accounts."""
    return "sent"


def test_a_validator_shared_by_two_parameters_is_blamed_on_the_first(request_call: RequestCall, alice: User) -> None:
    """Found: ``toolhub/arguments.py`` ``_parameter_of_validator`` returns the first field (in declaration order)
    one of whose validators has a frame in the traceback. A validator shared by several parameters (an ``IBAN =
    Annotated[str, AfterValidator(...)]`` alias, the usual way to reuse one) is in every one of them, so a
    failure on ``target_iban`` is told as ``- source_iban: its validator failed: KeyError: 'FR'``: the model is
    told to fix the argument that was valid.
    Expect: the refusal names the parameter whose value failed (``target_iban``), or, when that cannot be told,
    none (``(arguments)``), never another one.
    """
    transfer = Tool.from_function(_transfer, name="review_f_transfer", risk="low")
    with registry.temporarily(transfer):
        call = request_call(
            "review_f_transfer",
            {"source_iban": "DE89370400440532013000", "target_iban": "FR7630006000011234567890189"},
            alice,
            tenant="acme",
        )

    assert call.status == CallStatus.INVALID
    assert "source_iban" not in call.error, call.error


# --- 4b9df71: a UTF-16 text artifact is re-encoded, whether or not it held a secret ----------------------------

PLAIN_EXPORT = "name\tnote\r\nalice\tno secret here\r\n".encode("utf-16-be")  # RFC 2781: no BOM means big-endian


def _export(card: Annotated[str, Param("The card number.")]) -> ToolResult:
    """Export a report (which holds no card number) as UTF-16 text, big-endian without a byte order mark."""
    return ToolResult.artifact(PLAIN_EXPORT, name="report.txt", media_type="text/plain; charset=utf-16")


def test_a_utf16_text_artifact_without_a_secret_is_corrupted_by_the_scrubber(
    request_call: RequestCall, alice: User
) -> None:
    """Found: ``toolhub/tools/secrets.py`` ``SecretScrubber._scrubbed_text`` decodes a non-UTF-8 text artifact
    and encodes it back whenever the call has any secret, even when nothing was replaced. For ``charset=utf-16``
    Python's codec reads BOM-less text as little-endian and writes a little-endian BOM back: a big-endian export
    (the RFC 2781 default for "UTF-16" without a BOM) is stored as ``FF FE`` followed by its big-endian bytes,
    which every reader then decodes as garbage (``\u6e00\u6100...``). Before 4b9df71 such an artifact was stored
    byte for byte.
    Expect: an artifact in which no secret was found is stored exactly as the tool returned it (re-encoded only
    when a value was replaced).
    """
    export = Tool.from_function(_export, name="review_f_export", risk="low", sensitive=("card",))
    with registry.temporarily(export):
        call = request_call("review_f_export", {"card": CARD}, alice, tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, call.error
    stored = bytes(ToolCallArtifact.objects.get(call=call).content)
    assert stored == PLAIN_EXPORT, f"stored {stored[:12]!r}..., returned {PLAIN_EXPORT[:12]!r}..."


# --- 361d263: the process-wide union rewrites every thread's records, not only those holding a secret ---------


def test_an_unrelated_threads_error_loses_its_exception_while_any_call_holding_secrets_runs() -> None:
    """Found: ``toolhub/tools/secrets.py`` ``_scrubbing_factory`` applies ``_running.union`` to every record of
    every thread without a scope of its own, and ``SecretScrubber.log_record`` rewrites whatever it is given:
    the message pre-formatted and ``args`` dropped, ``exc_info`` set to ``None``. So while any call holding a
    secret runs in the process, an unrelated thread's ``logger.exception(...)`` (another request of a threaded
    web server, a worker's housekeeping thread) reaches handlers with no exception object and no args (error
    trackers group and report from ``exc_info``/``args``), although it holds no secret. Before 361d263 only the
    call's own records were rewritten.
    Expect: a record from another thread that holds none of the running calls' secrets reaches handlers as it
    was created (``exc_info`` and ``args`` kept); only one whose text holds a secret is rewritten.
    Decided (review g): its message and ``args`` are kept, and its traceback as text (``exc_text``), but not the
    exception object: its frames' local variables may hold a secret no text shows, and which thread works for a
    call cannot be told (``test_review_2026_12_05_g``).
    """
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    log = logging.getLogger("review_f.unrelated")
    handler = Keep()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    entered, done = threading.Event(), threading.Event()

    def call_holding_a_secret() -> None:
        with SecretScrubber(["sk-live-review-f-0123456789"]).scope():
            entered.set()
            done.wait(5)

    def unrelated() -> None:
        try:
            {}["missing"]
        except KeyError:
            log.exception("order %s failed", "O-17")

    runner = threading.Thread(target=call_holding_a_secret)
    runner.start()
    try:
        assert entered.wait(5)
        other = threading.Thread(target=unrelated)
        other.start()
        other.join(5)
    finally:
        done.set()
        runner.join(5)
        log.removeHandler(handler)

    (record,) = records
    assert record.getMessage() == "order O-17 failed"
    assert record.args == ("O-17",), "the record's args were dropped"
    assert record.exc_text and "KeyError: 'missing'" in record.exc_text, "the record's traceback was dropped"


# --- b01633e: the inner-call budget check reserves nothing --------------------------------------------------


class _AskingFor:
    """A model adapter whose turn asks for ``n`` tool calls."""

    def __init__(self, n: int) -> None:
        self.n = n

    def complete(self, **kwargs: Any) -> ModelTurn:
        calls = tuple(ModelToolCall(id=f"c{i}", name="record_effect", arguments="{}") for i in range(self.n))
        return ModelTurn(tool_calls=calls)


def test_two_agentic_tools_of_one_turn_both_pass_the_budget_check_for_the_same_remainder(alice: User) -> None:
    """Found: ``agents_app/agentic.py`` ``_ChargedToRun._refuse_beyond_calls`` counts the run's existing call rows
    (``calls_used`` + ``spending_below``) and takes no lock and records nothing for the calls it lets through.
    Two agentic tools the run called in one turn run on two workers at once; each inner turn is checked before
    the other's inner calls exist, so both are let through on the same remainder: a child given
    ``max_tool_calls=4`` that called two agentic tools (2 calls) runs 2 + 2 inner calls, 6 in all. (The loop's
    own turns cannot race this way: a run's turns are serial; ``_start_child`` locks the parent row for the same
    reason.)
    Expect: inner turns checked against one run's budget are serialised and charged as they are let through
    (the run's row locked, the asked calls reserved or their rows created in the same transaction), so the second
    turn here is refused.
    """
    agent = agent_create(name="review-f-budget", provider="scripted", tools=[], script=[{"content": "x"}])
    run = AgentRun.objects.create(
        agent=agent, user_id=alice.id, tenant="", input="go", status=RunStatus.RUNNING, limits={"max_tool_calls": 4}
    )
    for position, name in enumerate(("desk_a", "desk_b")):  # the run's turn: two agentic tools
        ToolCall.objects.create(
            run_id=run.id, tool_name=name, kind=CallKind.CALL, status=CallStatus.RUNNING, position=position
        )

    _ChargedToRun(_AskingFor(2), run.id).complete(messages=[], tools=[])  # desk_a's inner turn: 2 + 2 <= 4
    with pytest.raises(ModelError):  # desk_b's inner turn, before desk_a's inner calls are recorded
        _ChargedToRun(_AskingFor(2), run.id).complete(messages=[], tools=[])
