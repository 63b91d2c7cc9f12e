"""Review of 2026-12-05 (t): what developers copy — the demo's tools and agents, ``examples/`` and the README's code.

Each test fails on the reviewed code (main at 8bfd40c) and states who reaches what, where, and what is expected.

Findings: the demo's ``refund_debit`` refunded a debit once per *refund call* (its own idempotency key), not
once per debit, and it is an ordinary granted tool: a member (or a model listing it) refunded one debit again
and again, minting money; ``credit`` had no compensation, so rolling back the ``transfer-demo`` saga refunded
the debit and left the credit (money created); the README's subagent snippet described its input with
``Param(...)`` inside a pydantic model, where ``Param`` was ignored: the model never read the description.

Checked and found holding (no test here): every demo tool that reads or writes rows (``get_order``,
``create_order``, ``get_balance``, ``debit``, ``refund_debit``, ``credit``) takes the tenant from
``ToolContext`` and filters by it, and answers another tenant's order or account exactly like a missing one (no
existence oracle in the message); no demo tool takes a tenant, user or owner from its arguments; none accepts a
card number, IBAN or PIN (so none lacks ``sensitive=``); ``send_notification`` takes its key from a ``Secret``
preset and its refusal is scrubbed (tests/toolsec); ``create_order``'s rule ``_large_order`` reads the
*validated* ``Decimal`` (the schema refuses ``1000.001``, ``1e3`` spellings validate to the same value, a NaN or
infinity is refused by ``gt=0``/``max_digits``), so no spelling of an amount dodges it, and an operator's edit is
judged again; the ``order-demo``, ``transfer-demo`` and ``rollback-demo`` scripts name only ``acme``'s own
accounts; ``load_demo`` grants the demo groups to the tenant only and their capabilities to alice and the
operators only. ``examples/openai_agents/run.py``, ``examples/langgraph/approve_an_order.py`` (throwaway
PostgreSQL database) and ``examples/pydantic_ai/order_approval.py`` (on a freshly migrated and loaded SQLite
demo database) run offline to the end, the order created once at the operator's amount with the operator on its
audit trail; none hands the agent a token or lets the model pick the user. The README's complete snippets
("Writing tools", the pydantic models, ``ToolOptions``, the interceptors' settings) exec and do what they say
(tests/tools/test_readme_writing_tools.py); the others are fragments (``model``, ``alice``, ``await`` outside a
function) and are read, not run. The built-in tools' sample ``SHELL_COMMANDS`` lets no option that names a file
outside the workspace or runs a program through (``wc``'s file patterns cannot start with ``-``; ``grep``'s
``-[inrc]+`` excludes ``-R``, which follows links).
"""

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from demo.models import Account, LedgerEntry
from tests.security_review.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo(settings: Any) -> dict[str, User]:
    """The demo as ``make run`` loads it, with the production default (a tool needs a grant)."""
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_ACCESS": "deny"}
    call_command("load_demo", verbosity=0)
    return {name: User.objects.get(username=name) for name in ("alice", "operator")}


def _balances() -> dict[str, Decimal]:
    return dict(Account.objects.values_list("account_id", "balance"))


def test_a_debit_is_refunded_once_however_often_its_refund_is_asked_for(demo: dict[str, User]) -> None:
    """Found: ``demo/tools.py`` ``refund_debit`` skips a refund only when one was made under *its own* call's
    idempotency key; each new call has a new key. It is a granted tool of the ``ledger`` group like ``debit``, so
    alice (the demo's member; or a model whose agent lists it) debits 250 from ACC-1 with ``POST /api/v1/calls/``
    and asks for its refund three times: ACC-1 ends at 1500, 500 minted.
    Expect: a debit is paid back at most once, whoever asks and under whichever key; ACC-1 back at 1000.
    """
    alice = client_for(demo["alice"])
    debit = alice.post(
        "/api/v1/calls/", {"tool": "debit", "arguments": {"account_id": "ACC-1", "amount": "250"}}, format="json"
    )
    assert debit.status_code == 200 and debit.json()["status"] == "succeeded", debit.content
    tx_id = debit.json()["result"]["tx_id"]

    for _ in range(3):
        refund = alice.post(
            "/api/v1/calls/",
            {"tool": "refund_debit", "arguments": {"tx_id": tx_id, "account_id": "ACC-1", "amount": "250"}},
            format="json",
        )
        assert refund.status_code in (200, 403), refund.content

    assert _balances()["ACC-1"] == Decimal("1000.00")
    assert LedgerEntry.objects.filter(kind="refund").count() == 1


def test_rolling_back_the_transfer_demo_undoes_the_credit_too(demo: dict[str, User]) -> None:
    """Found: ``demo/tools.py`` ``credit`` declares no compensation. alice runs the ``transfer-demo`` agent (debit
    250 from ACC-1, credit 250 to ACC-2) and rolls the run back (``POST /api/v1/runs/{id}/rollback/``, the README's
    way to undo a run's completed steps): the debit is refunded, the credit stays, so ACC-1 is back at 1000 and
    ACC-2 keeps 750: 250 created by the rollback.
    Expect: the rollback undoes both steps; both accounts hold what they held before the run.
    """
    before = _balances()
    alice = client_for(demo["alice"])
    started = alice.post("/api/v1/runs/", {"agent": "transfer-demo", "input": "move 250"}, format="json")
    assert started.status_code == 201, started.content
    run_id = started.json()["id"]
    assert alice.get(f"/api/v1/runs/{run_id}/").json()["status"] == "completed"
    assert _balances()["ACC-2"] == before["ACC-2"] + 250

    rollback = alice.post(f"/api/v1/runs/{run_id}/rollback/")

    assert rollback.status_code in (200, 202), rollback.content
    assert _balances() == before


def _readme_snippet(section: str) -> str:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = text.index(f"\n## {section}")
    return re.findall(r"```python\n(.*?)```", text[start : text.index("\n## ", start + 1)], flags=re.S)[0]


def test_the_readme_subagent_snippet_runs_and_its_model_reads_the_tasks_description() -> None:
    """Found: README "Subagents and the blackboard" shows a ``myapp/tools.py`` that a developer copies whole; it
    uses ``BaseModel``, ``Annotated`` and ``Param`` without importing them (NameError), and with them imported the
    input model's ``task: Annotated[str, Param("What to research.")]`` reaches the model as a bare
    ``{"type": "string"}``: ``Param`` is read only from a function's own parameters (``toolhub/tools/specs.py``),
    pydantic ignores it inside a model, so the model never learns what to put there.
    Expect: the snippet runs as written, and the subagent tool's schema describes ``task``.
    """
    namespace: dict[str, Any] = {"__name__": "readme_subagents"}
    exec(compile(_readme_snippet("Subagents and the blackboard"), "README.md (Subagents)", "exec"), namespace)  # noqa: S102

    schema = namespace["ask_researcher"].json_schema
    assert schema["properties"]["task"].get("description") == "What to research.", schema
