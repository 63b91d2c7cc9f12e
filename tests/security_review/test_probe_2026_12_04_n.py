"""Probe of 2026-12-04 (n): the day's fixes (checkpoints, edits, grants, lookups, remote MCP, secrets).

Each test fails on the code as probed; its docstring says what was found and what is expected.
"""

import json
from typing import Any

import pytest

from tests.audit.conftest import (
    acknowledge_checkpoint,
    append_events,
    cut_chain_tail,
    keys_in_distinct_chains,
    verify_audit_fails,
)
from toolhub import checkpoints
from toolhub.checkpoints import audit_checkpoint_create
from toolhub.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_a_chain_cut_while_a_person_acknowledges_another_is_signed_away(
    audit_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: ``audit_checkpoint_create`` reads the heads before the check (so a chain cut after the check is
    not signed), but on the acknowledgement path it reads *every* head again after ``_acknowledged`` (to cover
    the acknowledgement's own event), and checks those heads against nothing. A chain cut by the owner between
    the check and that second read (READ COMMITTED: a concurrent commit is seen by the next statement) is signed
    into the acknowledged full checkpoint, though the acknowledged problems never named it; verify_audit then
    compares only with that checkpoint's run and reports the trail intact (toolhub/checkpoints.py,
    ``heads = _current_heads()`` after ``_acknowledged``).
    Expect: an acknowledgement signs over only what it acknowledged: chain b's cut, which no one acknowledged,
    still fails verification (or the acknowledgement is refused).
    """
    first, second = keys_in_distinct_chains(2)
    a = append_events(3, first)
    b = append_events(3, second)
    audit_checkpoint_create()
    cut_chain_tail(a[0], a[1], a[2])  # the problem the person investigates and acknowledges

    real = checkpoints._acknowledged

    def acknowledged_while_b_is_cut(*args: Any, **kwargs: Any) -> AuditEvent:
        event = real(*args, **kwargs)
        cut_chain_tail(b[0], b[1], b[2])  # the owner, on another connection, after the check
        return event

    monkeypatch.setattr(checkpoints, "_acknowledged", acknowledged_while_b_is_cut)
    try:
        acknowledge_checkpoint("incident 46: chain a lost its tail in the restore")
    except Exception:  # noqa: BLE001 - refusing is correct behaviour too
        pass
    monkeypatch.setattr(checkpoints, "_acknowledged", real)

    acknowledged = AuditEvent.objects.get(event_type="audit.checkpoint_acknowledged")
    assert not any(f"chain {b[0].chain}" in problem for problem in json.loads(acknowledged.data)["problems"])
    assert f"chain {b[0].chain}" in verify_audit_fails()


PROBE_N_PIN = "8642-probe-n"


def test_a_sensitive_value_shows_in_clear_once_its_tool_has_no_sensitive_parameter_left(
    request_call: Any, alice: Any
) -> None:
    """Found: ``selectors.withheld_names`` returns nothing to withhold for a tool that declares no sensitive
    name now and whose schema is open (a hand-written JSON Schema, ``additionalProperties`` unset). A tool that
    *drops* its only sensitive parameter (``pin`` replaced by a server-side ``Secret`` preset, or simply
    removed) therefore shows every earlier call's PIN in clear: the call page and API (``displayed_arguments``),
    the export, the approval desk and the external-result scrubber (toolhub/selectors.py lines 101-103).
    Expect: a name the tool no longer has is withheld for a call made under another version of it, whether or
    not the tool still declares some sensitive name (the PIN stays redacted).
    """
    from toolhub import registry
    from toolhub.exports import export_rows
    from toolhub.models import ToolCall
    from toolhub.selectors import displayed_arguments
    from toolhub.tools.definition import Tool

    v1_schema = {
        "type": "object",
        "properties": {"door": {"type": "string"}, "pin": {"type": "string"}},
        "required": ["door", "pin"],
    }
    v2_schema = {"type": "object", "properties": {"door": {"type": "string"}}, "required": ["door"]}
    v1 = Tool.create("probe_n_door", "Open a door.", v1_schema, lambda a: "open", sensitive=("pin",), risk="low")
    v2 = Tool.create("probe_n_door", "Open a door.", v2_schema, lambda a: "open", risk="low")
    with registry.temporarily(v1):
        call = request_call("probe_n_door", {"door": "vault", "pin": PROBE_N_PIN}, alice, tenant="acme")
        assert PROBE_N_PIN not in str(displayed_arguments(call))
    with registry.temporarily(v2):
        shown = displayed_arguments(call)
        exported = list(export_rows(ToolCall.objects.filter(pk=call.pk)))
    assert PROBE_N_PIN not in str(shown), shown
    assert PROBE_N_PIN not in str(exported), exported


#: A sensitive argument's secret held as a mapping's key (an IBAN -> amount split), at least 4 characters.
KEYED_IBAN = "GB33BUKB20201555555555-PROBE-N"


def test_a_code_rules_reason_quoting_a_sensitive_mappings_key_is_kept_in_clear(
    request_call: Any, alice: Any, operator: Any
) -> None:
    """Found: ``secrets.sensitive_values`` collects "each string or number within" a sensitive argument, but of a
    mapping only its values, never its keys (toolhub/tools/secrets.py, ``collect``: ``for item in
    value.values()``). A sensitive ``dict[str, int]`` keyed by IBAN (a split payment) is redacted whole on the
    pages, yet a code rule naming the payee ("first payment to <iban>", the pattern policy.py itself cites) is
    not scrubbed: the IBAN is stored as the request's reason, shown in the approvals API, the audit trail,
    e-mails and webhooks (and a tool result repeating a key is not scrubbed either).
    Expect: the keys of a sensitive mapping count as sensitive values; the reason reads ``[secret]``.
    """
    from approvals.models import ApprovalRequest
    from tests.helpers import audit_text
    from tests.security_review.conftest import client_for
    from toolhub import registry
    from toolhub.models import CallStatus
    from toolhub.tools.definition import Tool

    schema = {
        "type": "object",
        "properties": {"split": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "required": ["split"],
        "additionalProperties": False,
    }

    def rule(arguments: Any, ctx: Any) -> str:
        return f"first payment to {next(iter(arguments['split']))}"

    split_pay = Tool.create(
        "probe_n_split_pay",
        "Pay several accounts.",
        schema,
        lambda a: "paid",
        sensitive=("split",),
        needs_approval=rule,
    )
    with registry.temporarily(split_pay):
        call = request_call("probe_n_split_pay", {"split": {KEYED_IBAN: 100}}, alice, tenant="acme")
        assert call.status == CallStatus.PENDING_APPROVAL
        request = ApprovalRequest.objects.get(call=call)
        shown = {
            "reason": request.reason,
            "approvals API": client_for(operator).get(f"/api/v1/approvals/{request.pk}/").content.decode(),
            "audit trail": audit_text(call),
        }
    leaked = sorted(where for where, text in shown.items() if KEYED_IBAN in text)
    assert leaked == [], f"a sensitive mapping's key quoted by a code rule shows in clear in: {leaked}"
