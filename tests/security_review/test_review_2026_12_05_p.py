"""Review of 2026-12-05 (p): the day's fixes (df5120f..4fbcf26) for regressions and holes they missed.

Each test fails on the reviewed code (main at 4fbcf26) and states what was found and what is expected.

Findings: a path of ~1,000+ directories made the workspace quota's walk raise on every later write (and the walk
skipped directories it could not open); a code rule that *matches* (or ``needs_approval=True``) dropped the
operators' matching rule's approvers and timeout; the desk's "Still to approve" counted approvals that no longer
stand; an approver whose standing came back could not release a call that had its approvals; a NUL in a console
form's posted field was a 500 on PostgreSQL.

Checked and found holding (no test here): the quota — directories a refused write would create are counted
before any is made and none is made on a refusal; a failed write's temporary file is removed (one a killed
worker leaves is counted as a file); names are compared as the file system does; a hard link counts its size
under each name (over, never under); sparse files count their apparent size; symbolic links count as entries and
are not followed; a refusal names only the caller's own workspace (the root is ``<WORKSPACE_ROOT>/<own slug>``,
slugs match ``[A-Za-z0-9_-]``); concurrent writes and the shell tool are documented limits. Secrets — the linger
only ever redacts more; the ``makeRecord`` wrapper is installed once (marked) and scrubs only records given
``extra=``; non-string extras are scrubbed item by item or by ``repr``, and one that cannot be shown is left;
the bound of the latest 256 ended scopes is documented (note: a record of a thread without a call's context costs
~85 µs instead of ~10 µs while 256 scopes linger, measured, not a finding). Policy — a rule source failing still
holds the call; ``recorded_call_verdict`` goes through the same path. Standing — the decision service, the API's
``approvals_in_round`` and the desk's "Approvals in this round" count the same; a concurrent removal of an
approver serialises on the request's row lock; e-mails name only ``approvers_of`` (unchanged). The middleware —
a percent-encoded lone surrogate or ``%C0%80`` decodes to U+FFFD (query) or stays percent-encoded (path); header
NULs are refused by the HTTP servers before Django. Console — exports write ``isoformat()`` (unchanged by
``toolhub/formats``); ``OpenableLinksOnly`` asks the related admin's model-level view permission. Identities — the
slug and group-name triggers fire on UPDATE only (flush truncates; ``load_demo``/``sync_tools`` create or leave
names); agents are renamed only within what creating one allows (names unique per tenant).
"""

import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalRule, ApprovalStatus
from tests.builtins.conftest import CallBuiltin, call_builtin, granted, refusal, root  # noqa: F401 - fixtures
from tests.builtins.conftest import builtins as builtins  # noqa: F401 - fixture
from tests.helpers import RequestCall, console
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from tests.testapp.models import SideEffect
from toolhub import Param, Tool, registry
from toolhub.models import CallStatus, Tenant

pytestmark = pytest.mark.django_db


# --- 1b27ed5: the workspace quota's walk ------------------------------------------------------------------------

DEEP = "/".join(["d"] * 1200) + "/deep.txt"


def _nest(top: Path, name: str, levels: int) -> None:
    """``levels`` directories each inside the last, as ``mkdir -p`` makes them (by descriptor: no path too long)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)


def _unnest(top: Path, name: str) -> None:
    """Remove what ``_nest`` made, a level at a time (``shutil.rmtree`` recurses once per level too)."""
    while (top / name / name).is_dir():
        os.rename(top / name / name, top / f"{name}.up")
        os.rmdir(top / name)
        os.rename(top / f"{name}.up", top / name)
    shutil.rmtree(top / name, ignore_errors=True)


@pytest.mark.usefixtures("granted")
def test_a_deep_path_the_file_tools_wrote_breaks_the_quota_measure_of_every_later_write(
    call_builtin: CallBuiltin,  # noqa: F811 - the fixture
    root: Path,  # noqa: F811 - the fixture
) -> None:
    """The model (a prompt injection) writes one file under 1,200 nested directories (1,201 entries, well within
    the quota's 10,000), then any file.

    Found: ``toolhub/builtins/quota.py`` ``workspace_usage`` walks with ``os.fwalk``, which recurses once per
    level (and holds a descriptor per level): from about 1,000 levels every later measure raises
    ``RecursionError``, so every write of the tenant, however small, fails with an internal error instead of being
    measured; and ``fwalk`` without ``onerror`` silently leaves out any directory it cannot open or list (a
    descriptor limit reached, a directory a command made unreadable), counting the workspace short.
    Expect: the file tools write no path deeper than the measure goes (refused, code ``quota``, nothing written),
    later writes are measured as before, and a workspace a command made deeper than that is held at its size
    (growth refused with code ``quota``), never counted short or failing with an internal error.
    """
    try:
        deep = call_builtin("write_text_file", {"file_path": DEEP, "content": "x"})
    finally:
        _unnest(root / "acme", "d")  # what the unfixed tool wrote (pytest's clean-up would recurse on it)
    assert deep.status == CallStatus.FAILED
    assert refusal(deep)["code"] == "quota", deep.error
    assert not (root / "acme" / "d").exists()

    later = call_builtin("write_text_file", {"file_path": "notes.txt", "content": "hello"})
    assert later.status == CallStatus.SUCCEEDED, later.error

    # a command (``mkdir -p``) made the workspace deeper than any file tool writes: growth is refused, not a crash
    _nest(root / "acme", "c", 1200)
    try:
        grown = call_builtin("write_text_file", {"file_path": "more.txt", "content": "more"})
    finally:
        _unnest(root / "acme", "c")
    assert grown.status == CallStatus.FAILED
    assert refusal(grown)["code"] == "quota", grown.error
    shrunk = call_builtin("write_text_file", {"file_path": "notes.txt", "content": "hi"})
    assert shrunk.status == CallStatus.SUCCEEDED, shrunk.error


# --- 296b3ad: a code rule's verdict and the operators' rule that matches the call --------------------------------


def _payment(
    payee: Annotated[str, Param("Who is paid.")],
    amount: Annotated[int, Param("How much.")],
) -> str:
    """Pay someone."""
    return "paid"


def _new_payee(arguments: Any, ctx: Any) -> str | None:
    """The developer's rule: a payee never paid before needs a look."""
    return "a payee never paid before" if arguments["payee"] not in {"landlord", "utility"} else None


def test_a_code_rule_that_matches_holds_the_call_for_fewer_approvers_than_the_operators_rule_asks(
    request_call: RequestCall, alice: User
) -> None:
    """Found: ``toolhub/policy.py`` ``approval_verdict`` returns the code rule's verdict with the risk's minimum
    approvals as soon as the rule returns a reason, before the operators' rules are read (296b3ad applied their
    terms to a rule that *fails* only). The operators' rule for the tool asks two approvers for every payment
    (``ApprovalRule.required_approvals=2``): a payment to a known payee is held for two, yet a model that names a
    new payee (which makes the developer's rule match: the more suspicious call) has it held for one, with no
    timeout of the operators'. ``needs_approval=True`` drops the operators' terms alike.
    Attacker: the model (a prompt injection) choosing the arguments.
    Expect: the code rule still names the reason (first match wins), but a call it holds is held on terms at
    least as strict as the operators' rule that matches it (approvers, timeout), as a failed rule's call is.
    """
    pay = Tool.from_function(_payment, name="review_p_pay", risk="low", needs_approval=_new_payee)
    always = Tool.from_function(_payment, name="review_p_pay_always", risk="low", needs_approval=True)
    ApprovalRule.objects.create(name="payments: two", tool_name="review_p_pay", required_approvals=2)
    ApprovalRule.objects.create(
        name="always: two", tool_name="review_p_pay_always", required_approvals=2, timeout_seconds=600
    )
    with registry.temporarily(pay, always):
        known = request_call("review_p_pay", {"payee": "landlord", "amount": 900}, alice, tenant="acme")
        new = request_call("review_p_pay", {"payee": "attacker-iban", "amount": 900}, alice, tenant="acme")
        held = request_call("review_p_pay_always", {"payee": "landlord", "amount": 900}, alice, tenant="acme")

    assert ApprovalRequest.objects.get(call=known).required_approvals == 2
    to_new = ApprovalRequest.objects.get(call=new)
    assert to_new.reason == "a payee never paid before"
    assert to_new.required_approvals >= 2, f"a new payee's payment is held for {to_new.required_approvals}"
    always_held = ApprovalRequest.objects.get(call=held)
    assert always_held.required_approvals >= 2
    assert always_held.expires_at <= always_held.created_at + timedelta(seconds=601)


# --- a75b0c8: whose approvals count (ApproverStanding) -----------------------------------------------------------


def _two_approver_request(alice: User, rule_name: str) -> ApprovalRequest:
    ApprovalRule.objects.create(name=rule_name, tool_name="risky_effect", required_approvals=2, priority=50)
    held = client_for(alice).post("/api/v1/calls/", {"tool": "risky_effect", "arguments": {"note": "p"}}, format="json")
    return ApprovalRequest.objects.get(pk=held.json()["approval_id"])


def _approve(user: User, request: ApprovalRequest) -> Any:
    request.refresh_from_db()
    return client_for(user).post(f"/api/v1/approvals/{request.pk}/approve/", {"round": request.round}, format="json")


@pytest.mark.django_db(transaction=True)
def test_the_desk_says_no_approval_is_missing_when_an_approval_no_longer_counts(
    alice: User, tenant: Tenant, roles: dict[str, Group], acme_operator: User
) -> None:
    """acme's operator approves alice's two-approver call, then loses the operators role; a second operator
    approves. The decision service counts one standing approval and keeps the call held (a75b0c8).

    Found: the approval desk's "Still to approve" (``approvals.selectors.approval_progress``) counts every
    approval of the round, standing or not: it tells the operators "0 more approval(s) needed ... May still
    approve: nobody who can decide it is available", while "Approvals in this round" and the API say 1 of 2 —
    the request looks complete, nobody is pointed at it, and it expires unreleased.
    Expect: the desk counts what a decision counts (``ApproverStanding``): one more approval needed, and a
    third operator named as one who may still give it.
    """
    second = make_user("op-second-p", tenant=tenant, staff=True, groups=(roles["operators"],))
    make_user("op-third-p", tenant=tenant, staff=True, groups=(roles["operators"],))
    request = _two_approver_request(alice, "platform-two-p")
    assert _approve(acme_operator, request).status_code == 200
    acme_operator.groups.remove(roles["operators"])
    assert _approve(second, request).json()["approvals_in_round"] == 1

    page = console(second).get(reverse("admin:approvals_approvalrequest_change", args=[request.pk]))

    text = page.content.decode()
    assert "Round 1: 1 of 2 approval(s)" in text
    assert "1 more approval(s) needed" in text, "the desk says no approval is missing"
    assert "op-third-p" in text


@pytest.mark.django_db(transaction=True)
def test_an_approver_whose_standing_came_back_cannot_release_a_call_that_has_its_approvals(
    alice: User, tenant: Tenant, roles: dict[str, Group], acme_operator: User
) -> None:
    """acme's operator approves alice's two-approver call and is moved out of the operators role for a day (a
    reorganisation); a second operator approves, and the call waits for one more standing approval, as it should.
    The first operator is given the role back: both approvals stand again.

    Found: ``approvals.services._decide_in_transaction`` counts the standing approvals only when a decision is
    made, and ``_approval`` refuses a second approval of the same version by the same person: with both
    approvals standing ("Round 1: 2 of 2 approval(s)" on the desk, ``approvals_in_round`` 2 in the API) the call
    stays held, neither approver may release it, and where no third operator exists it expires unreleased.
    Expect: an approver whose approval of this version is on record may confirm it, which records no second
    approval but releases the call when the approvals standing now reach the quorum (the four-eyes rule holds:
    they are distinct people who may each decide now); a confirmation that would not release it is refused.
    """
    second = make_user("op-second-q", tenant=tenant, staff=True, groups=(roles["operators"],))
    request = _two_approver_request(alice, "platform-two-q")
    assert _approve(acme_operator, request).status_code == 200
    acme_operator.groups.remove(roles["operators"])
    assert _approve(second, request).json()["approvals_in_round"] == 1
    acme_operator.groups.add(roles["operators"])
    acme_operator = User.objects.get(pk=acme_operator.pk)  # a fresh login: permissions read again

    again = _approve(acme_operator, request)

    assert again.status_code == 200, again.content
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED
    assert list(SideEffect.objects.values_list("note", flat=True)) == ["p"]
    assert sorted(request.decisions.values_list("decided_by", flat=True)) == sorted([acme_operator.pk, second.pk])


# --- a72ec01: text no column can hold, in a form's body -----------------------------------------------------------


@pytest.mark.postgres
def test_a_nul_in_a_console_forms_posted_field_is_refused_not_a_server_error(platform_user: User) -> None:
    """A platform operator (cross-tenant, the ``view_toolcall`` permission that "Verify now" asks) posts the audit
    trail's "Verify now" form with a ``tenant`` field holding a NUL (a mistyped or crafted form post).

    Found: ``toolhub.middleware.StorableAddressMiddleware`` (a72ec01) refuses a NUL in the path and the query
    string only; a form's body reaches the views raw. ``toolhub.admin_verify.audit_verify_view`` passes the posted
    tenant to ``Tenant.objects.filter(slug=...)``: on PostgreSQL a 500 (``DataError``), as the console's list
    filters were before a72ec01.
    Expect: 400 and nothing else, as for the same NUL in the address: a form field holding text no column can
    hold is refused before any view puts it into a query.
    """
    browser = console(platform_user)
    browser.raise_request_exception = False  # a server error is answered as a browser gets it: a 500
    answer = browser.post(reverse("admin:toolhub_audit_verify"), {"tenant": "acme\x00", "next": "/admin/"})

    assert answer.status_code == 400
