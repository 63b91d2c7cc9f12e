"""Every python example of the README's "Writing tools" section runs, and does what the README says."""

import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from pydantic import ValidationError

from toolhub import ToolContext, ToolError
from toolhub.authorization import CallPrincipal
from toolhub.interceptors import ArgumentPolicy, InterceptedCall, PIIRedaction, Refuse, configured_interceptors
from toolhub.policy import approval_verdict
from toolhub.tools.registry import registry

README = Path(__file__).resolve().parents[2] / "README.md"


def _section_examples(title: str) -> list[str]:
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else None]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def _run(source: str, index: int) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"readme_writing_tools_{index}"}
    exec(compile(source, f"README.md (Writing tools, example {index + 1})", "exec"), namespace)  # noqa: S102
    return namespace


def _call(built: Any, arguments: dict[str, Any], ctx: ToolContext | None = None) -> Any:
    return built.invoke(built.validate_arguments(arguments), ctx or ToolContext(tenant="acme"))


def _principal() -> CallPrincipal:
    return CallPrincipal(user_id=None, username="readme", tenant="acme")


def check_refund(namespace: dict[str, Any]) -> None:
    refund = namespace["refund"].tool
    with registry.temporarily(refund):
        # the schema: the parameters the model fills in, described; the context is not one of them
        schema = refund.json_schema
        assert list(schema["properties"]) == ["order_id", "amount", "note"]
        assert schema["properties"]["order_id"]["description"] == "The order to refund."
        assert schema["properties"]["amount"]["description"] == "How much to refund, in the order's currency."
        assert refund.sensitive == {"note"} and refund.description == "Refund an order."
        # a call runs with the injected context; a ToolError is what the model reads
        result = _call(refund, {"order_id": 7, "amount": "12.50", "note": "late"})
        assert result == {"order_id": 7, "refunded": Decimal("12.50"), "tenant": "acme"}
        with pytest.raises(ToolError, match="The amount must be positive."):
            _call(refund, {"order_id": 7, "amount": "-1", "note": "x"})
        # needs_approval: the rule's reason holds a large refund; a small one (medium risk) runs
        ctx = ToolContext(tenant="acme")
        large = refund.validate_arguments({"order_id": 7, "amount": "900", "note": "x"})
        small = refund.validate_arguments({"order_id": 7, "amount": "20", "note": "x"})
        held = approval_verdict(tool=refund, definition=None, arguments=large, ctx=ctx, principal=_principal())
        assert held is not None and held.reason == "refunds above 500 need an operator" and held.source == "code"
        assert approval_verdict(tool=refund, definition=None, arguments=small, ctx=ctx, principal=_principal()) is None


def check_models(namespace: dict[str, Any]) -> None:
    quote, bulk_quote, quote_type = namespace["quote"].tool, namespace["bulk_quote"], namespace["Quote"]
    with registry.temporarily(quote, bulk_quote):
        for built in (quote, bulk_quote):
            assert built.input_type is namespace["QuoteRequest"]
            assert built.json_schema["required"] == ["sku", "quantity"]
            assert _call(built, {"sku": "A-1", "quantity": 3}) == quote_type(sku="A-1", total=Decimal("29.70"))
            with pytest.raises(ValidationError):
                built.validate_arguments({"sku": "A-1", "quantity": 0})
        assert quote.idempotent and quote.description == "Price a quantity of a product."
        assert bulk_quote.name == "bulk_quote" and not bulk_quote.idempotent


def check_shared_options(namespace: dict[str, Any]) -> None:
    balance = namespace["balance"]
    with registry.temporarily(balance):
        assert (balance.risk, balance.group, balance.category, balance.idempotent) == (
            "medium",
            "ledger",
            "ledger",
            True,
        )
        assert _call(balance, {"account_id": "A-1"}) == {"balance": "0.00"}
        with pytest.raises(ValidationError):
            balance.validate_arguments({"account": "A-1"})


def check_interceptors(namespace: dict[str, Any]) -> None:
    with override_settings(TOOLHUB={**getattr(settings, "TOOLHUB", {}), **namespace["TOOLHUB"]}):
        policy, redaction = configured_interceptors()
    assert isinstance(policy, ArgumentPolicy) and isinstance(redaction, PIIRedaction)

    def call(tool_name: str, arguments: dict[str, Any]) -> InterceptedCall:
        return InterceptedCall(tool_name, arguments, tenant="acme", user_id=None, agent_name="", context={})

    assert isinstance(policy.before(call("send_email", {"to": "ceo@competitor.com"})), Refuse)
    refused = policy.before(call("send_note", {"to": "a@example.com", "cc": ["b@example.com", "c@gmail.com"]}))
    assert isinstance(refused, Refuse) and refused.message == "Only company addresses."
    assert policy.before(call("send_note", {"to": "a@example.com", "cc": ["b@example.com"]})) is None
    redacted = redaction.after(call("lookup", {}), {"contact": "write to bob@example.com"})
    assert redacted == {"contact": "write to [email redacted]"}


CHECKS: list[Callable[[dict[str, Any]], None]] = [check_refund, check_models, check_shared_options, check_interceptors]


def test_every_example_of_the_section_has_a_check() -> None:
    assert len(_section_examples("Writing tools")) == len(CHECKS)


@pytest.mark.django_db
@pytest.mark.parametrize("index", range(len(CHECKS)), ids=[check.__name__ for check in CHECKS])
def test_the_example_runs_and_does_what_the_readme_says(index: int) -> None:
    examples = _section_examples("Writing tools")
    CHECKS[index](_run(examples[index], index))
