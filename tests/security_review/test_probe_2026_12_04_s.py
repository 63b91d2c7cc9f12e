"""Probe of 2026-12-04 (s): built-in tools, sagas and compensations, approval notifications, direct calls.

1. ``toolhub/sagas/mapping.py`` ``_planned_arguments`` quotes the exception of a compensation mapping function
   (``KeyError('<card number>')``) in the compensation's ``mapping_error``/``last_error``, its audit events and the
   saga API, unscrubbed of the step's sensitive values.
2. The same module's check that a sensitive value goes only to a sensitive parameter uses the scrubber, whose
   4-character floor lets a mapping function copy a 3-digit CVV, whole, into a parameter shown in clear.
3. ``toolhub/builtins/shell.py`` ``command_environment`` makes ``HOME`` the tenant's workspace, which the file
   tools write: a planted ``.gitconfig`` makes a listed ``git status`` run any command, here into globex's workspace.

Looked at without a finding: workspace paths (``..``, absolute, NUL, symlinks, hard links, FIFOs, cwd), the
allow list's path checks, the command's environment, output caps and time limit; saga visibility, ownership and
rollback across tenants and users, compensation retries and resolution; the webhook's signing, secret and
tenant-scoped deliveries; approval e-mails' recipients and body; direct calls' context, saga ids and idempotency.
"""

from collections.abc import Callable
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User

from tests.builtins.conftest import CallBuiltin, call_builtin, granted, root  # noqa: F401 - fixtures
from tests.builtins.conftest import builtins as builtins  # noqa: F401 - fixture
from tests.security_review.conftest import client_for
from toolhub import Param, tool
from toolhub.models import AuditEvent, CallStatus, Tenant, ToolCall
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db


# --- a compensation mapping that raises quotes a sensitive argument everywhere ------------------------------------

_CARD = "4111-1111-1111-1111"
#: The payment processor's refund handles, keyed by card (a lookup a mapping function naturally does).
_PROCESSOR_HANDLES: dict[str, str] = {}


@tool(risk="low", idempotent=True)
def probe_s_void_charge(charge_ref: str, handle: str) -> dict:
    """Void a card charge."""
    return {"voided": charge_ref}


@tool(
    risk="low",
    sensitive=("card",),
    compensate_with="probe_s_void_charge",
    compensation_mapping=lambda arguments, result: {
        "charge_ref": result["ref"],
        "handle": _PROCESSOR_HANDLES[arguments["card"]],
    },
)
def probe_s_charge_card(card: Annotated[str, Param("The card to charge.")], amount: int) -> dict:
    """Charge a card."""
    return {"ref": "CH-1", "amount": amount}


def test_a_compensation_mapping_that_raises_quotes_the_sensitive_card_in_the_audit_trail_api_and_model(
    alice: User, tenant: Tenant, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    """Found: ``toolhub/sagas/mapping.py`` ``_planned_arguments`` turns an exception of the tool's
    ``compensation_mapping`` into ``MappingError(f"... raised {type(exc).__name__}: {exc}")``. A mapping that looks
    something up by a sensitive argument (``HANDLES[arguments["card"]]``) raises ``KeyError('4111-...')``, and the
    card number is stored in ``Compensation.mapping_error``/``last_error``, written to the ``compensation.recorded``
    and ``compensation.failed`` audit events, shown by ``GET /api/v1/sagas/{id}/`` (``last_error``) and in the
    admin, in clear. Everywhere else a tool's error has its sensitive values replaced by ``[secret]``.
    Expect: the card number appears in no audit event, no compensation row and no API answer: the mapping's error
    is scrubbed of the step's sensitive values like any error of the call (or only its exception type is kept).
    """
    client = client_for(alice)
    with registry.temporarily(probe_s_void_charge, probe_s_charge_card):
        with django_capture_on_commit_callbacks(execute=True):
            assert client.post("/api/v1/sagas/", {"saga_id": "pay-s1"}, format="json").status_code == 201
            step = client.post(
                "/api/v1/calls/",
                {"tool": "probe_s_charge_card", "arguments": {"card": _CARD, "amount": 5}, "saga_id": "pay-s1"},
                format="json",
            )
        assert ToolCall.objects.get(pk=step.json()["id"]).status == CallStatus.SUCCEEDED, step.content
        with django_capture_on_commit_callbacks(execute=True):
            rolled = client.post("/api/v1/sagas/pay-s1/rollback/", format="json")
        shown = client.get("/api/v1/sagas/pay-s1/").content.decode()

    from toolhub.sagas.models import Compensation

    stored = [str(data) for data in AuditEvent.objects.values_list("data", flat=True)]
    rows = [f"{c.mapping_error} {c.last_error}" for c in Compensation.objects.all()]
    leaks = {
        "audit events": sum(_CARD in data for data in stored),
        "compensation rows": sum(_CARD in row for row in rows),
        "saga API": _CARD in shown or _CARD in rolled.content.decode(),
    }
    assert not any(leaks.values()), f"the sensitive card number is shown in clear: {leaks}"


# --- a short sensitive value (a CVV) passes the "sensitive only to sensitive" check of a mapping function ----------


@tool(risk="low", idempotent=True)
def probe_s_reverse_auth(auth_ref: str, card_check: str) -> dict:
    """Reverse a card authorisation (``card_check`` is not declared sensitive)."""
    return {"reversed": auth_ref}


@tool(
    risk="low",
    sensitive=("cvv",),
    compensate_with="probe_s_reverse_auth",
    compensation_mapping=lambda arguments, result: {"auth_ref": result["ref"], "card_check": arguments["cvv"]},
)
def probe_s_authorise(cvv: Annotated[str, Param("The card's security code.")], amount: int) -> dict:
    """Authorise a card payment."""
    return {"ref": "AU-1"}


def test_a_mapping_function_copies_a_three_digit_sensitive_value_into_a_parameter_not_declared_sensitive() -> None:
    """Found: ``toolhub/sagas/mapping.py`` ``compensation_arguments``/``_copied_into`` detect a sensitive value in the
    planned arguments with ``SecretScrubber``, which ignores values shorter than ``MIN_SECRET_LENGTH`` (4). A mapping
    function that copies a 3-digit CVV, as is, into a compensation parameter not declared sensitive is planned: the
    compensation's call then stores and shows the CVV in clear (API, admin, audit ``call.requested``). The README:
    "A value of one of the step's sensitive= arguments goes only to a parameter the compensation declares sensitive
    too ... by a mapping function, it is not planned".
    Expect: ``MappingError`` naming ``card_check`` (a planned value, or an item of it, equal to a sensitive value is
    refused whatever its length; the 4-character floor is for finding values inside longer text).
    """
    from toolhub.sagas.mapping import MappingError, compensation_arguments

    try:
        planned = compensation_arguments(
            tool=probe_s_authorise.tool,
            compensation=probe_s_reverse_auth.tool,
            arguments={"cvv": "737", "amount": 5},
            result={"ref": "AU-1"},
        )
    except MappingError as refused:
        assert "card_check" in str(refused) and "737" not in str(refused)
    else:
        raise AssertionError(f"the CVV is planned into a parameter not declared sensitive: {planned}")


# --- HOME is the tenant's writable workspace: a planted dotfile turns a listed command into any command -------------

#: A read-only git inspection, as an operator would list it to let an agent look at a repository.
_GIT_ALLOWED = [{"command": "git", "arguments": ["init", "status", "-q", "--short"], "max_arguments": 2}]


@pytest.mark.usefixtures("granted")
def test_a_gitconfig_written_to_the_workspace_home_makes_a_listed_git_status_run_a_command_in_another_tenant(
    call_builtin: CallBuiltin,  # noqa: F811 - the fixture
    root: Any,  # noqa: F811 - the fixture
    settings: Any,
) -> None:
    """Found: ``toolhub/builtins/shell.py`` ``command_environment`` sets ``HOME`` to the tenant's workspace, which
    ``write_text_file`` writes. Commands read their per-user configuration from ``$HOME``; git runs
    ``core.fsmonitor`` (and ``core.pager``, ``core.sshCommand``, ``man.<tool>.cmd``...) through ``sh``. The model
    writes ``.gitconfig`` with a file tool, then runs ``git init`` and ``git status``, both on the allow list (no
    operator asked): git runs the planted command, which is on no allow list and writes into tenant globex's
    workspace (``../globex``). The allow list and the workspace are both bypassed.
    Expect: nothing the file tools write is read as a command's configuration: ``HOME`` (and ``XDG_CONFIG_HOME``)
    point to an empty directory outside every workspace, with ``GIT_CONFIG_NOSYSTEM=1`` (git also reads a
    repository's ``.git/config``: refuse writes under ``.git/`` or list git only with ``-c core.fsmonitor=`` ...).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "SHELL_COMMANDS": _GIT_ALLOWED}
    (root / "globex").mkdir(parents=True, exist_ok=True)
    planted = call_builtin(
        "write_text_file",
        {"file_path": ".gitconfig", "content": '[core]\n\tfsmonitor = "echo escaped > ../globex/planted.txt; false"\n'},
    )
    assert planted.status == CallStatus.SUCCEEDED, planted.error
    init = call_builtin("execute_shell_command", {"argv": ["git", "init", "-q"]})
    assert init.status == CallStatus.SUCCEEDED, (init.status, init.error, init.result)
    status = call_builtin("execute_shell_command", {"argv": ["git", "status"]})
    assert status.status == CallStatus.SUCCEEDED, (status.status, status.error)

    assert not (root / "globex" / "planted.txt").exists(), (
        "a listed `git status` ran the command planted in $HOME/.gitconfig, and wrote into globex's workspace"
    )
