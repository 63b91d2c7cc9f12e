"""Review of the 2026-12-04 security work (34ca669..HEAD): regressions and correctness bugs it found, fixed.

A remote server's ordinary query value is no secret, and a definition is compared as it is kept; a call
whose tool changed its parameters goes back to an operator instead of crashing the worker; an argument a
schema admits beyond its properties is shown; the export withholds as the pages do; migration 0022
rebinds calls a saga queues again, and reverses.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve
from tests.helpers import RequestCall
from tests.mcpclient.fake_server import FakeCrm
from toolhub import registry
from toolhub.mcp_client.models import RemoteMcpCredential, RemoteMcpServer, RemoteMcpTool
from toolhub.mcp_client.services import remote_server_sync, remote_tool_accept
from toolhub.models import CallStatus, Tenant

pytestmark = pytest.mark.django_db

TOOL = "crm__lookup_customer"


@pytest.fixture
def crm() -> Any:
    from tests.mcpclient.fake_server import serving

    fake = FakeCrm()
    with serving(fake) as url:
        yield fake, url


def test_a_servers_ordinary_url_query_value_does_not_quarantine_its_tools_on_every_call(
    crm: tuple[FakeCrm, str],
    tenant: Tenant,
    operator: User,
    alice: User,
    request_call: RequestCall,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``credential_scrubber(headers, server.url)`` treats *every* query value of the URL as a secret, and
    ``remote_server_sync`` scrubs the listed definitions with it before hashing them. A plain option in the
    URL (``?format=json``) that a definition also spells changes the stored definition, so the hash accepted
    never equals the hash of what the server lists at call time (``provider._call_remote`` hashes it raw):
    the accepted tool is quarantined on its first call, and again after every acceptance."""
    fake, url = crm
    fake.description = "Look up a customer by id; answers json."
    monkeypatch.setenv("CRM_TOKEN_ACME_R", "token-acme-r-12345")
    server = RemoteMcpServer.objects.create(
        name="crm", url=f"{url}?key=urlkey-5f3a9c1e&format=json", risk="low", select_names=["lookup_customer"]
    )
    RemoteMcpCredential.objects.create(server=server, tenant="acme", credential_env="CRM_TOKEN_ACME_R")
    remote_server_sync(server=server, actor="operator:platform")
    row = RemoteMcpTool.objects.get(tool_name=TOOL)
    remote_tool_accept(row=row, actor="operator:platform", user=operator)

    call = request_call(TOOL, {"customer_id": "c-1"}, alice, tenant="acme")

    assert call.status == "succeeded", call.error
    assert RemoteMcpTool.objects.get(tool_name=TOOL).status != "quarantined"
    assert "[secret]" not in str(row.current_definition), row.current_definition


# --- a call sent back after its tool changed: the new tool's code rule now reads the old arguments ---------------

REVIEW_PAID: list[int] = []


def test_a_call_whose_tool_changed_its_parameters_goes_back_for_approval_instead_of_crashing_the_worker(
    request_call: RequestCall, alice: User, operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    """Before: a call approved under v1, run after a deploy that renamed a parameter, went back to approval
    (``tool_call_require_reapproval``), where an operator saw it and rejected it. Now
    ``waiting._changed_tool_verdict`` -> ``policy.recorded_call_verdict`` runs the *new* tool's code rule on
    the *old* stored arguments when they no longer validate ("as stored when the changed tool no longer
    accepts them"): a rule written for the new parameters (``a["amount_eur"]``) raises KeyError inside the
    worker's transaction, the move to pending_approval rolls back, the call stays claimed (running) and the
    reconciler retries it for ever."""
    from toolhub.tools.definition import Tool

    def review_pay(amount: int) -> str:
        """Pay."""
        REVIEW_PAID.append(amount)
        return "paid"

    def review_pay_v2(amount_eur: int) -> str:
        """Pay."""
        REVIEW_PAID.append(amount_eur)
        return "paid"

    REVIEW_PAID.clear()
    original = Tool.from_function(review_pay, risk="high")
    changed = Tool.from_function(
        review_pay_v2, name="review_pay", risk="medium", needs_approval=lambda a, ctx: a["amount_eur"] > 1000
    )
    assert original.version != changed.version
    with registry.temporarily(original):
        call = request_call("review_pay", {"amount": 500}, alice, tenant="acme")
        request = ApprovalRequest.objects.get(call=call)
        with django_capture_on_commit_callbacks(execute=False) as dispatches:
            approval_approve(request_id=request.pk, user=operator, expected_round=1)
    with registry.temporarily(changed):
        with django_capture_on_commit_callbacks(execute=True):
            for dispatch in dispatches:
                dispatch()
    call.refresh_from_db()
    request.refresh_from_db()
    assert REVIEW_PAID == []
    assert call.status == CallStatus.PENDING_APPROVAL, call.status
    assert (request.status, request.round) == (ApprovalStatus.PENDING, 2)


# --- migration 0022: a failed compensation the saga will queue again keeps its plain binding ------------------


def test_migration_0022_rebinds_a_failed_compensation_call_the_saga_queues_again(
    request_call: RequestCall, alice: User
) -> None:
    """``0022_keyed_approval_hashes`` rebinds only ``pending_approval, queued, running, awaiting_result`` and
    says settled calls are never checked again. But ``toolhub.sagas.compensating`` (lines 70-76) queues a
    compensation call in ``failed`` or ``needs_attention`` *again*, same row and same ``approval_hash``, and the
    worker's ``_refusal_at_execution`` then checks the binding with ``approval_hash_matches``: an approved
    compensation whose retry was scheduled across the upgrade is denied ("The arguments differ from what was
    approved") instead of run. Fix: add ``failed`` and ``needs_attention`` (at least for kind=compensation) to
    ``WAITING``."""
    import hashlib
    import importlib

    from django.apps import apps as django_apps

    from toolhub.audit_hash import canonical_json
    from toolhub.models import CallKind, ToolCall
    from toolhub.pipeline import approval_hash_matches
    from toolhub.tools.definition import Tool

    def review_refund(amount: int) -> str:
        """Refund (undoes a payment)."""
        return "refunded"

    rebind = importlib.import_module("toolhub.migrations.0022_keyed_approval_hashes").rebind_waiting_calls
    with registry.temporarily(Tool.from_function(review_refund, risk="high")):
        call = request_call("review_refund", {"amount": 500}, alice, tenant="acme")
    material = canonical_json({"tool": "review_refund", "version": call.tool_version, "arguments": {"amount": 500}})
    plain = hashlib.sha256(material.encode()).hexdigest()
    # As before the upgrade: an approved compensation that failed; the saga will queue it again.
    ToolCall.objects.filter(pk=call.pk).update(
        status=CallStatus.FAILED, kind=CallKind.COMPENSATION, approval_hash=plain
    )

    rebind(django_apps, None)

    call.refresh_from_db()
    assert approval_hash_matches(call.approval_hash, "review_refund", call.tool_version, call.arguments)


# --- withheld_names: a name the schema admits beyond its "properties" is not a name "the tool no longer has" ------


def test_an_argument_a_remote_tools_schema_admits_as_an_additional_property_is_shown_to_the_operator(
    request_call: RequestCall, alice: User
) -> None:
    """``selectors.withheld_names`` withholds every argument name missing from ``json_schema["properties"]``
    (meant for a parameter renamed since the call). A remote MCP tool is ``Tool.create(..., allow_any=True)`` on
    the server's ``inputSchema`` as is, and JSON Schema admits names beyond ``properties`` unless
    ``additionalProperties`` is false (a free-form ``{"type": "object", "additionalProperties": {...}}``, or a
    schema with no ``properties`` at all). Such a tool's arguments, valid *now*, are shown redacted in the
    call, the approval desk and the exports, and left out of the approval edit form (``approvals.admin._editable``)
    since a5e8790/cf6d4bd: the operator approves values they cannot see. Fix: withhold only names the current
    schema would refuse (or that a recorded version had and the current lacks), not names it admits."""
    from toolhub.selectors import displayed_arguments
    from toolhub.tools.definition import Tool

    schema = {"type": "object", "additionalProperties": {"type": "string"}}
    remote_like = Tool.create(
        "review_tag_customer",
        "Tag a customer (free-form labels).",
        schema,
        lambda arguments: "tagged",
        risk="high",
        allow_any=True,
    )
    with registry.temporarily(remote_like):
        call = request_call("review_tag_customer", {"segment": "enterprise"}, alice, tenant="acme")
        assert call.status == CallStatus.PENDING_APPROVAL, call.error
        assert displayed_arguments(call) == {"segment": "enterprise"}


# --- exports: the renamed-parameter rule applies only to tools that still have a sensitive parameter -----------

REVIEW_PIN = "4711-review"


def _door_v1(door: str, pin: str) -> str:
    """Open a door."""
    return "open"


def _door_v2(door: str) -> str:
    """Open a door (badge readers now; no PIN)."""
    return "open"


def test_the_export_withholds_a_parameter_the_tool_no_longer_has_like_the_pages(
    request_call: RequestCall, alice: User
) -> None:
    """``selectors.withheld_names`` (pages, API) withholds a name the tool no longer has, whatever the tool's
    sensitive names are now. ``exports._rows`` calls it only ``elif sensitive:`` (the tool *still* has a
    sensitive name): once a deploy drops the sensitive ``pin`` parameter and the tool has none left, the
    export writes every earlier call's PIN in clear while the call page and the API withhold it. One rule,
    implemented twice. Fix (toolhub/exports.py:100-104): always redact a registered tool's row through
    ``withheld_names`` (cache per tool whether it can matter)."""
    from toolhub.exports import export_rows
    from toolhub.models import ToolCall
    from toolhub.selectors import displayed_arguments
    from toolhub.tools.definition import Tool

    v1 = Tool.from_function(_door_v1, name="review_door", sensitive=("pin",), risk="low")
    v2 = Tool.from_function(_door_v2, name="review_door", risk="low")
    with registry.temporarily(v1):
        call = request_call("review_door", {"door": "vault", "pin": REVIEW_PIN}, alice, tenant="acme")
    with registry.temporarily(v2):
        assert REVIEW_PIN not in str(displayed_arguments(call))  # the pages and the API withhold it
        exported = [row for row in export_rows(ToolCall.objects.filter(pk=call.pk))]
    assert REVIEW_PIN not in str(exported), exported


def test_migration_0022_reversed_leaves_waiting_calls_bound_as_the_code_before_it_checks(
    request_call: RequestCall, alice: User
) -> None:
    """0022 (and approvals 0006) reverse with ``RunPython.noop``: after ``migrate toolhub 0021`` and a rollback of
    the code, every call waiting for a worker (and every pending request) keeps its HMAC binding, which the
    previous code compares with a plain SHA-256: approved calls are denied ("The arguments differ from what was
    approved") and pending requests cannot be released. Fix: a reverse function that writes the plain digest
    back where the keyed one still binds the row (``approval_hash_matches``)."""
    import hashlib
    import importlib

    from django.apps import apps as django_apps

    from toolhub.audit_hash import canonical_json
    from toolhub.models import ToolCall
    from toolhub.tools.definition import Tool

    def review_wire(amount: int) -> str:
        """Wire money."""
        return "wired"

    migration = importlib.import_module("toolhub.migrations.0022_keyed_approval_hashes").Migration
    (operation,) = migration.operations
    with registry.temporarily(Tool.from_function(review_wire, risk="high")):
        call = request_call("review_wire", {"amount": 500}, alice, tenant="acme")
    ToolCall.objects.filter(pk=call.pk).update(status=CallStatus.QUEUED)  # approved, waiting for a worker

    operation.reverse_code(django_apps, None)

    call.refresh_from_db()
    material = canonical_json({"tool": "review_wire", "version": call.tool_version, "arguments": call.arguments})
    assert call.approval_hash == hashlib.sha256(material.encode()).hexdigest()
