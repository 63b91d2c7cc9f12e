"""Compensation arguments: explicit mapping, else names from the result, then the arguments."""

import dataclasses
from typing import Annotated, TypedDict

import pytest
from pydantic import BaseModel, Field

from toolhub import Param, tool
from toolhub.sagas.mapping import (
    MappingError,
    compensation_arguments,
    known_result_fields,
    match_arguments,
    normalized_name,
    unmatched_parameters,
)


@pytest.mark.parametrize("name", ["txId", "tx_id", "TX_ID", "TxId", "tx-id", "txid"])
def test_names_match_case_underscore_and_camel_case_insensitively(name: str) -> None:
    assert normalized_name(name) == normalized_name("tx_id") == "txid"


def test_different_names_stay_different() -> None:
    assert normalized_name("account") != normalized_name("account_id")


@tool
def debit(account_id: str, amount: int) -> dict:
    """Take money."""
    return {}


@tool
def refund(tx_id: str, account_id: str, amount: int, reason: str = "compensation") -> dict:
    """Give it back."""
    return {}


def test_arguments_come_from_the_result_first_then_the_original_arguments() -> None:
    # given a result that names the transaction in camelCase and repeats the amount differently
    result = {"txId": "TX-1", "amount": 70, "status": "SUCCESS"}

    # when
    arguments = compensation_arguments(
        tool=debit.tool, compensation=refund.tool, arguments={"account_id": "A", "amount": 100}, result=result
    )

    # then the result wins over the arguments, and an optional parameter nobody names keeps its default
    assert arguments == {"tx_id": "TX-1", "account_id": "A", "amount": 70}


def test_a_scalar_result_leaves_only_the_arguments() -> None:
    with pytest.raises(MappingError) as failure:
        compensation_arguments(tool=debit.tool, compensation=refund.tool, arguments={"account_id": "A"}, result=3)
    message = str(failure.value)
    assert "tx_id, amount" in message and "'refund'" in message and "mapping" in message


def test_a_missing_required_parameter_names_what_was_looked_at() -> None:
    specs = refund.tool.parameters
    with pytest.raises(MappingError, match=r"needs tx_id.*result: amount.*arguments: accountid"):
        match_arguments(specs, [("result", {"amount": 1}), ("arguments", {"accountId": "A"})], compensation="refund")


def test_an_explicit_mapping_is_used_as_is() -> None:
    @tool(compensation_mapping=lambda arguments, result: {"tx_id": result["ref"], "account_id": "X", "amount": 1})
    def pay(amount: int) -> dict:
        """Pay."""
        return {}

    arguments = compensation_arguments(
        tool=pay.tool, compensation=refund.tool, arguments={"amount": 5}, result={"ref": "R"}
    )
    assert arguments == {"tx_id": "R", "account_id": "X", "amount": 1}


def test_a_mapping_that_raises_or_returns_garbage_is_a_mapping_error() -> None:
    @tool(compensation_mapping=lambda arguments, result: result["nope"])
    def pay(amount: int) -> dict:
        """Pay."""
        return {}

    @tool(compensation_mapping=lambda arguments, result: ["not", "a", "dict"])
    def pay_list(amount: int) -> dict:
        """Pay."""
        return {}

    with pytest.raises(MappingError, match="raised KeyError"):
        compensation_arguments(tool=pay.tool, compensation=refund.tool, arguments={}, result={})
    with pytest.raises(MappingError, match="returned list"):
        compensation_arguments(tool=pay_list.tool, compensation=refund.tool, arguments={}, result={})


class DebitOut(BaseModel):
    tx_id: str = Field(alias="txId")
    balance: int


class DebitDict(TypedDict):
    txId: str


@dataclasses.dataclass
class DebitData:
    transaction: str


def test_result_fields_are_known_for_pydantic_typeddict_and_dataclass_results() -> None:
    @tool
    def a(x: int) -> DebitOut:
        """A."""
        raise NotImplementedError

    @tool
    def b(x: int) -> DebitDict:
        """B."""
        raise NotImplementedError

    @tool
    def c(x: int) -> Annotated[DebitData, "doc"]:
        """C."""
        raise NotImplementedError

    @tool
    def d(x: int) -> dict:
        """D."""
        return {}

    assert known_result_fields(a.tool) == {"tx_id", "txId", "balance"}
    assert known_result_fields(b.tool) == {"txId"}
    assert known_result_fields(c.tool) == {"transaction"}
    assert known_result_fields(d.tool) is None


def test_unmatched_parameters_only_for_known_result_types() -> None:
    @tool
    def typed_debit(account_id: Annotated[str, Param("Account.")], amount: int) -> DebitData:
        """Debit with a declared result."""
        raise NotImplementedError

    assert unmatched_parameters(typed_debit.tool, refund.tool) == ["tx_id"]
    assert unmatched_parameters(debit.tool, refund.tool) is None  # a dict result: cannot be known before a call


def test_a_sensitive_value_reaches_only_a_parameter_the_compensation_declares_sensitive() -> None:
    """By names or by a mapping function, whole or inside a longer value: refused, naming the parameter only."""

    @tool(sensitive=("card",), compensation_mapping=lambda a, r: {"tx_id": r["ref"], "account_id": f"acct {a['card']}"})
    def pay_by_card(card: str, amount: int) -> dict:
        """Pay by card."""
        return {}

    @tool(sensitive=("account_id",))
    def refund_to_account(tx_id: str, account_id: str) -> dict:
        """Refund to an account (declared sensitive)."""
        return {}

    with pytest.raises(MappingError, match=r"in account_id, which it does not declare sensitive") as refused:
        compensation_arguments(
            tool=pay_by_card.tool,
            compensation=refund.tool,
            arguments={"card": "4111-0000", "amount": 5},
            result={"ref": "R"},
        )
    assert "4111" not in str(refused.value) and "sensitive=('account_id',)" in str(refused.value)

    planned = compensation_arguments(
        tool=pay_by_card.tool,
        compensation=refund_to_account.tool,
        arguments={"card": "4111-0000", "amount": 5},
        result={"ref": "R"},
    )
    assert planned == {"tx_id": "R", "account_id": "acct 4111-0000"}


def test_a_mapping_error_is_scrubbed_of_the_steps_sensitive_values() -> None:
    """The exception of a mapping function is shown like any error of the call: sensitive values replaced."""
    handles: dict[str, str] = {}

    @tool(sensitive=("card",), compensation_mapping=lambda a, r: {"tx_id": handles[a["card"]], "account_id": "A"})
    def charge_card(card: str, amount: int) -> dict:
        """Charge a card."""
        return {}

    with pytest.raises(MappingError, match=r"raised KeyError: '\[secret\]'") as refused:
        compensation_arguments(
            tool=charge_card.tool, compensation=refund.tool, arguments={"card": "4111-1111", "amount": 5}, result={}
        )
    assert "4111" not in str(refused.value)
    assert refused.value.__cause__ is None  # the original exception, which holds the card, does not travel


def test_a_mapping_error_quoting_a_value_too_short_to_scrub_keeps_only_its_type() -> None:
    @tool(sensitive=("cvv",), compensation_mapping=lambda a, r: {"tx_id": {}[a["cvv"]], "account_id": "A"})
    def check_cvv(cvv: str) -> dict:
        """Check a CVV."""
        return {}

    with pytest.raises(MappingError, match=r"raised KeyError \(its message is withheld") as refused:
        compensation_arguments(tool=check_cvv.tool, compensation=refund.tool, arguments={"cvv": "737"}, result={})
    assert "737" not in str(refused.value)


@pytest.mark.parametrize("copied", ["737", ["x", "737"], {"check": "737"}, {"737": "key"}, 737])
def test_a_short_sensitive_value_copied_whole_into_a_clear_parameter_is_refused(copied: object) -> None:
    """Equal to a sensitive value, whole or as a nested item, whatever its length: not planned."""

    @tool(sensitive=("cvv",), compensation_mapping=lambda a, r: {"tx_id": "T", "account_id": copied})
    def authorise_cvv(cvv: str) -> dict:
        """Authorise."""
        return {}

    with pytest.raises(MappingError, match=r"in account_id, which it does not declare sensitive") as refused:
        compensation_arguments(tool=authorise_cvv.tool, compensation=refund.tool, arguments={"cvv": "737"}, result={})
    assert "737" not in str(refused.value)


def test_a_short_sensitive_value_inside_longer_text_or_to_a_sensitive_parameter_is_planned() -> None:
    """The minimum length still bounds finding a value inside text (every "737" in an id would be refused)."""

    @tool(sensitive=("cvv",), compensation_mapping=lambda a, r: {"tx_id": "T", "account_id": "ACC-7370"})
    def inside(cvv: str) -> dict:
        """Authorise."""
        return {}

    @tool(sensitive=("cvv",), compensation_mapping=lambda a, r: {"tx_id": "T", "account_id": a["cvv"]})
    def whole(cvv: str) -> dict:
        """Authorise."""
        return {}

    @tool(sensitive=("account_id",))
    def reverse(tx_id: str, account_id: str) -> dict:
        """Reverse (declared sensitive)."""
        return {}

    arguments = {"cvv": "737"}
    assert compensation_arguments(tool=inside.tool, compensation=refund.tool, arguments=arguments, result={}) == {
        "tx_id": "T",
        "account_id": "ACC-7370",
    }
    assert compensation_arguments(tool=whole.tool, compensation=reverse.tool, arguments=arguments, result={}) == {
        "tx_id": "T",
        "account_id": "737",
    }
