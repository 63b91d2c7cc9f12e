"""Probe of 2026-12-04 (u): the tool model and the argument path, where the model's arguments meet the tool.

Each test fails on the code as probed; its docstring says what was found ("Found: ...") and what is expected
("Expect: ..."). Tried and found holding (no test here): setting an injected parameter (``ctx``, ``progress``, a
preset, a ``FromContext`` object) or a reserved context key by sending it as an argument, in another case, with a
look-alike or duplicate key (refused as unknown, or the boundary's value wins); NaN/Infinity (as numbers or as
strings into ``float``), integers past 4,300 digits, NUL and lone surrogates in keys and values, nesting past
``MAX_NESTING`` (each an ``invalid`` call with a message, nothing run); a secret preset echoed by the tool in its
result, its keys, an error, a ``ToolError``, a suspension, progress notes and a text artifact's name and content
(scrubbed); an output model's validation error quoting the result (values withheld); an interceptor's rewrite
into arguments the schema refuses (denied, nothing run).
"""

import time
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import AfterValidator, BaseModel, ConfigDict, SecretStr
from pydantic.alias_generators import to_camel

from tests.helpers import RequestCall, audit_text, for_a_worker
from toolhub import Param, Tool, registry, tool
from toolhub.exceptions import ToolDefinitionError
from toolhub.models import CallStatus

pytestmark = pytest.mark.django_db

#: What the probe's tools received, in order (the side effect an attacker is after).
SEEN: list[Any] = []


@pytest.fixture(autouse=True)
def _seen() -> Iterator[None]:
    SEEN.clear()
    yield
    SEEN.clear()


# --- a SecretStr parameter: its value reaches the result, and the worker runs the tool on the mask -------------------


def _unlock(door: Annotated[str, Param("The door.")], pin: Annotated[SecretStr, Param("The door's PIN.")]) -> str:
    """Unlock a door with its PIN."""
    SEEN.append(pin.get_secret_value())
    return f"door {door} unlocked with PIN {pin.get_secret_value()}"


def _unlock_tool() -> Tool | None:
    """The tool, or ``None`` when ``SecretStr`` parameters are refused at definition (an accepted fix)."""
    try:
        return Tool.from_function(_unlock, name="probe_u_unlock", risk="low", sensitive=("pin",))
    except ToolDefinitionError:
        return None


def test_a_secretstr_sensitive_argument_repeated_in_the_result_is_stored_in_clear(
    request_call: RequestCall, alice: User
) -> None:
    """Found: a sensitive parameter typed ``SecretStr`` (a type pydantic and ``check_annotation`` accept) is
    collected by ``toolhub.tools.secrets.sensitive_values`` as ``str(value)`` and its JSON form, both the mask
    ``**********``, never its value (``get_secret_value()``). The call's scrubber (``SecretScrubber.for_call``)
    therefore knows only the mask: a tool that repeats the PIN has it stored in clear in the call's result (the
    API, the admin, what the model reads back), which the README promises is replaced by ``[secret]``.
    Expect: the PIN is found in no stored result and no audit event; ``[secret]`` stands in its place (or such a
    parameter is refused when the tool is defined).
    """
    unlock = _unlock_tool()
    if unlock is None:
        return  # refused when defined: nothing can leak
    with registry.temporarily(unlock):
        call = request_call("probe_u_unlock", {"door": "D-7", "pin": "4821-7730"}, alice, tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert SEEN == ["4821-7730"]
    assert "4821-7730" not in str(call.result), f"the PIN is stored in the call's result: {call.result!r}"
    assert "4821-7730" not in audit_text(call)


def test_a_secretstr_argument_reaches_the_tool_as_its_mask_when_a_worker_runs_the_call(
    request_call: RequestCall, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``toolhub.arguments.storable_arguments`` stores the validated arguments through ``to_jsonable_python``,
    which writes a ``SecretStr`` as ``"**********"``: the call's stored arguments (what the approval hash binds and
    what the worker re-validates in ``execution._execute_claimed``) hold the mask, not the PIN. Run in the
    requesting process the tool gets the PIN (the in-memory validated values); queued for a worker it gets
    ``**********``, and the call succeeds: the door is "unlocked" with a value nobody sent, and no one is told.
    Expect: the worker runs the tool on the value the model sent (or the tool is refused at definition, naming the
    parameter, rather than run on a mask).
    """
    from toolhub import pipeline
    from toolhub.execution import tool_call_execute

    unlock = _unlock_tool()
    if unlock is None:
        return  # refused when defined: nothing runs on a mask
    monkeypatch.setattr(pipeline, "dispatch_call", lambda call: None)  # the test delivers it
    with registry.temporarily(unlock):
        with for_a_worker():
            call = request_call("probe_u_unlock", {"door": "D-7", "pin": "4821-7730"}, alice, tenant="acme")
        assert call.status == CallStatus.QUEUED
        tool_call_execute(call_id=call.id, worker="w1")

    assert SEEN == ["4821-7730"], f"the worker ran the tool with pin={SEEN!r}"


# --- a validator quoting a sensitive value: cut before it is scrubbed -------------------------------------------


def _french_iban(value: str) -> str:
    if not value.startswith("FR"):
        raise ValueError(
            f"the account holder's IBAN {value} is not held in France; ask the customer for an account held at a "
            "French bank and call this tool again with that account number"
        )
    return value


@tool(risk="low", sensitive=("iban",))
def probe_u_pay_fr(iban: Annotated[str, AfterValidator(_french_iban), Param("Where the money goes.")]) -> str:
    """Pay into a French account."""
    SEEN.append(iban)
    return "paid"


def test_a_long_validator_message_is_cut_before_the_sensitive_value_is_scrubbed(
    request_call: RequestCall, alice: User
) -> None:
    """Found: ``toolhub.arguments.validate_arguments`` bounds the message first (``bounded_model_message``: a line
    over 150 characters keeps its first and last 60 and drops the middle), and only then does
    ``call_arguments.prepared_version`` replace the sensitive values (``_without_sensitive_values``), which match
    whole values only. A validator that quotes the IBAN (the README's "<card> fails the Luhn check") in a long
    sentence has the IBAN cut in two at the boundary: ``DE89370400440 [...71 characters...]`` stays in the
    call's error, its ``call.invalid`` audit event, the API and what the model reads. (The output-model path was
    fixed for the same reason: "pydantic quotes values cut in the middle, which no scrubber recognises".)
    Expect: no part of the IBAN (here its first 13 characters) is kept; scrub first, then bound.
    """
    iban = "DE89370400440532013000"
    with registry.temporarily(probe_u_pay_fr):
        call = request_call("probe_u_pay_fr", {"iban": iban}, alice, tenant="acme")

    assert call.status == CallStatus.INVALID and SEEN == []
    assert iban[:13] not in call.error, f"part of the IBAN is kept in the error: {call.error!r}"
    assert iban[:13] not in audit_text(call)


# --- the tenant-argument check and a model whose fields are aliased ---------------------------------------------


class ProbeUTransfer(BaseModel):
    """A transfer within a tenant (camelCase on the wire, as the JS clients of the same service expect)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    tenant_id: str
    amount: int


def _transfer(request: ProbeUTransfer) -> dict[str, Any]:
    SEEN.append(request.tenant_id)
    return {"moved": request.amount, "tenant": request.tenant_id}


probe_u_transfer = Tool.from_function(
    _transfer,
    name="probe_u_transfer",
    description="Move money within a tenant.",
    input_model=ProbeUTransfer,
    risk="low",
)


def test_a_tenant_id_field_under_a_camel_case_alias_escapes_the_tenant_argument_check(
    request_call: RequestCall, alice: User
) -> None:
    """Found: ``authorization.tenant_argument_denial`` looks for the exact keys ``tenant``, ``tenant_id`` and
    ``tenant_slug`` in the validated arguments, which for an input model are ``model_dump(by_alias=True)``
    (``ModelInputs.validate``). An input model with ``alias_generator=to_camel`` (common for models shared with
    JavaScript clients) has its ``tenant_id`` field stored and checked as ``tenantId``: alice, in acme, moves money
    with ``tenant_id="globex"`` (sent as ``tenantId``, or as ``tenant_id`` since ``populate_by_name``), and the tool
    reads ``request.tenant_id == "globex"``. README: "An argument named tenant, tenant_id or tenant_slug must be the
    caller's own tenant."
    Expect: the field is checked by its name as well as its alias: the call is denied and the tool never runs.
    """
    with registry.temporarily(probe_u_transfer):
        call = request_call("probe_u_transfer", {"tenantId": "globex", "amount": 500}, alice, tenant="acme")

    assert SEEN == [], "the tool ran for tenant globex on acme's call"
    assert call.status == CallStatus.DENIED, (call.status, call.result)


# --- a hand-written JSON Schema: "format" published, never asserted ---------------------------------------------


def _looked_up(arguments: dict[str, Any]) -> str:
    SEEN.append(dict(arguments))
    return "found"


probe_u_lookup = Tool.create(
    "probe_u_lookup",
    "Look an order up by its id.",
    {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "format": "uuid", "description": "The order's UUID."},
            "since": {"type": "string", "format": "date", "description": "Only changes since this day."},
        },
        "required": ["order_id"],
        "additionalProperties": False,
    },
    _looked_up,
    risk="low",
)


def test_a_hand_written_schemas_format_is_published_but_not_enforced(request_call: RequestCall, alice: User) -> None:
    """Found: ``toolhub.tools.jsonschema_args.validate_against_schema`` builds its validator without a format checker
    (``validator_for(schema)(schema)``), so ``"format"`` is never asserted, though ``_describe`` words a format
    error ("Input should satisfy format ...") and the tool's published schema tells the model the value is a UUID
    and a date. A ``Tool.create``/``Tool.external`` tool is run (or its external connector called) with
    ``order_id="1 OR 1=1"`` and ``since="yesterday"``, where a pydantic-typed tool (``UUID``, ``date``) would have
    refused them with a clear ``invalid``.
    Expect: the call is ``invalid`` and nothing runs.
    """
    with registry.temporarily(probe_u_lookup):
        call = request_call("probe_u_lookup", {"order_id": "1 OR 1=1", "since": "yesterday"}, alice, tenant="acme")

    assert SEEN == [], f"the tool ran on {SEEN!r}"
    assert call.status == CallStatus.INVALID, call.status


# --- PIIRedaction and a result's keys ----------------------------------------------------------------------------


@tool(risk="low")
def probe_u_mail_stats() -> dict[str, Any]:
    """How many messages each sender sent today."""
    return {"alice.smith@example.com": 3, "senders": ["bob.jones@example.com"]}


def test_pii_redaction_leaves_email_addresses_in_a_results_keys(
    request_call: RequestCall, alice: User, settings: Any
) -> None:
    """Found: ``toolhub.interceptors.PIIRedaction._walk`` rewrites a mapping's values and keeps its keys as they
    are (``{key: self._walk(item) ...}``). A result keyed by person (messages per sender, balance per card, calls
    per phone number: the commonest shape of a statistics tool) keeps every address, while the same address in a
    list beside it is redacted. README: it "replaces, in every string of a result, email addresses, card numbers
    ... and phone numbers"; the secret scrubber, by contrast, does rewrite keys.
    Expect: no email address is left in the stored result, keys included.
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "INTERCEPTORS": ["toolhub.interceptors.PIIRedaction"]}
    with registry.temporarily(probe_u_mail_stats):
        call = request_call("probe_u_mail_stats", {}, alice, tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert "bob.jones@example.com" not in str(call.result)  # a value: redacted
    assert "alice.smith@example.com" not in str(call.result), f"a key keeps the address: {call.result!r}"


# --- a time limit the tool swallows -----------------------------------------------------------------------------


@tool(risk="low", timeout=0.3)
def probe_u_flaky_backend(query: Annotated[str, Param("What to ask.")]) -> str:
    """Ask a slow backend, retrying on any error (as many client libraries do)."""
    for _attempt in range(3):
        try:
            time.sleep(0.5)  # the backend's answer
            SEEN.append(query)
            return "answered"
        except Exception:  # noqa: BLE001, S112 - the retry loop a tool author writes
            continue
    return "gave up"


def test_a_tool_that_catches_its_timeout_runs_past_its_limit_and_succeeds(
    request_call: RequestCall, alice: User
) -> None:
    """Found: on the main thread ``toolhub.tools.timeouts.call_with_timeout`` raises ``ToolTimeoutError`` (an
    ``Exception``) inside the tool once, from a one-shot ``SIGALRM``, and never looks at the clock again. A tool with
    an ordinary retry loop (``except Exception: continue``) swallows it, the next attempt runs with no limit at
    all, and the call is recorded ``succeeded`` after overrunning its ``timeout=``: the limit the README says is
    "enforced on the worker" (and that bounds a batch's lease and the task's time limit) is not. The thread path of
    the same function (``in_this_thread``) does check the elapsed time after the tool returns.
    Expect: a call whose tool ran past its limit is ``failed`` with the time-limit message (an atomic tool's writes
    rolled back), whatever the tool caught.
    """
    with registry.temporarily(probe_u_flaky_backend):
        call = request_call("probe_u_flaky_backend", {"query": "status"}, alice, tenant="acme")

    # Here the tool answered after about 0.8 s (a swallowed alarm at 0.3 s, then a whole unlimited attempt).
    assert call.status == CallStatus.FAILED, (call.status, call.result)
    assert "time limit" in call.error


# --- a refused call's raw arguments and a sensitive value under another spelling --------------------------------


@tool(risk="low", sensitive=("pin",))
def probe_u_open_safe(safe: Annotated[str, Param("Which safe.")], pin: Annotated[str, Param("The safe's PIN.")]) -> str:
    """Open a safe."""
    SEEN.append(pin)
    return "open"


def test_a_sensitive_value_sent_under_a_misspelt_name_is_kept_in_clear_in_the_raw_arguments(
    request_call: RequestCall, alice: User
) -> None:
    """Found: models often get a parameter's case wrong (``PIN`` for ``pin``). The call is refused ``invalid`` (an
    unknown argument), and ``pipeline._raw_text`` keeps what the model sent for auditors (``ToolCall.raw_arguments``,
    on the call's admin page) redacted by the tool's sensitive *names* only (``audit.redacted_arguments_text``), so
    ``{"PIN": "90210-33"}`` is stored whole. The displayed arguments do the opposite since probe 2026-12-04
    (``selectors.withheld_names``): a name a tool with sensitive parameters does not declare is never shown, as it
    may hold one of their values.
    Expect: the raw arguments of a tool with sensitive parameters withhold every name it does not declare, as the
    displayed arguments do; the PIN is stored nowhere.
    """
    with registry.temporarily(probe_u_open_safe):
        call = request_call("probe_u_open_safe", {"safe": "vault-2", "PIN": "90210-33"}, alice, tenant="acme")

    assert call.status == CallStatus.INVALID and SEEN == []
    assert "90210-33" not in call.raw_arguments, f"the PIN is kept for auditors: {call.raw_arguments!r}"
    assert "90210-33" not in audit_text(call)
