"""Review of 2026-12-05 (ay): where secrets and sensitive arguments travel (``toolhub/tools/secrets.py``).

Findings (each test fails on the reviewed code; its docstring says what was found and what is expected):

1. A ``Secret`` preset whose setting is structured (a credentials mapping, a list of keys, a mapping holding a
   pydantic ``SecretStr``) was scrubbed only as its whole ``str()`` (``SecretScrubber.for_presets``): the password
   a tool repeats in its result, its ``ToolError`` or a log line was stored, told to the model and logged in clear.
2. An interceptor's refusal or traceback was scrubbed with the arguments as sent only
   (``call_arguments._intercepted_arguments``): after an earlier interceptor rewrote a sensitive value (a card
   number typed with spaces, normalised), ``ArgumentPolicy``'s refusal or a later interceptor's ``KeyError`` quoted
   the rewritten card number into the call's error, its detail, the audit trail and the model's answer.

Checked and found holding (no test here): Celery messages carry ids only and every task ignores its result; an
exception escaping a call's scope is logged outside it with its exception object replaced by scrubbed text (the
ended scope lingers in ``_RunningScopes``), so a handler reading ``exc_info`` sees no frame holding the secret;
Django's logging has a console handler only (no ``AdminEmailHandler``, no locals in a traceback's text); the REST
error handler answers a ``ToolhubError``'s message only, and a model provider's error as a ``ModelError`` naming
a status (its chained SDK error is never logged); admin ``LogEntry`` rows name changed fields and ``str()`` of
rows, none of which holds an argument or a credential (artifacts' names are scrubbed); approval webhooks carry the
scrubbed reason and the keyed hash, no arguments; an operator's edit goes through the same interceptors (so
finding 2's fix covers edits too) and its refusal is shown only to that operator, nothing recorded; progress
notes are scrubbed before they are cut; an artifact's summary text is scrubbed with the result.
"""

import json
import logging
from collections.abc import Mapping
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from pydantic import SecretStr

from tests.helpers import RequestCall
from toolhub import Param, Tool, ToolError, registry
from toolhub.interceptors import InterceptedCall, Interceptor, Refuse
from toolhub.models import AuditEvent, CallStatus
from toolhub.tools.presets import Secret

pytestmark = pytest.mark.django_db

PASSWORD = "pw-rv-ay-7f3e9c21d0"
SETTING = "RV_AY_VENDOR_ACCOUNT"

vendor_log = logging.getLogger("rv_ay.vendor")


def _login(shop: Annotated[str, Param("The shop.")], account: dict) -> str:
    """Log in to the vendor with the account's user and password (it logs its request, then is refused)."""
    vendor_log.warning("POST /login user=%s password=%s", account["user"], account["password"])
    raise ToolError(f"The vendor refused {account['user']}:{account['password']} for {shop}.")


def _login_ok(shop: Annotated[str, Param("The shop.")], account: dict) -> dict:
    """Log in and return the session (a careless tool echoes its request)."""
    return {"shop": shop, "request": {"user": account["user"], "password": account["password"]}}


@pytest.mark.parametrize(
    "account",
    [{"user": "shop-42", "password": PASSWORD}, {"user": "shop-42", "password": SecretStr(PASSWORD)}],
    ids=["mapping", "secretstr-inside"],
)
def test_a_structured_secret_presets_password_is_scrubbed_from_the_error_and_the_log(
    request_call: RequestCall, alice: User, caplog: pytest.LogCaptureFixture, settings: Any, account: dict
) -> None:
    """Found: ``SecretScrubber.for_presets`` scrubs ``str(value)`` of a preset's value; a setting holding a
    credentials mapping is scrubbed only as the mapping's whole repr, so the password a tool repeats (its
    ``ToolError``, a log line written while the call runs) is stored, told to the model and logged in clear.
    Expect: every string (and a pydantic secret's value) within a ``Secret`` preset's value is scrubbed, as
    ``sensitive_values`` collects a sensitive argument's (its keys, the setting's field names, are not).
    """
    plain = {
        key: (value.get_secret_value() if isinstance(value, SecretStr) else value) for key, value in account.items()
    }
    setattr(settings, SETTING, plain if isinstance(account["password"], str) else account)

    def login(shop: Annotated[str, Param("The shop.")], account: dict) -> str:
        """Log in (the account's password may be a pydantic secret)."""
        password = account["password"]
        return _login(shop, {**account, "password": getattr(password, "get_secret_value", lambda: password)()})

    tool = Tool.from_function(login, name="rv_ay_login", risk="low", presets={"account": Secret(SETTING)})
    caplog.set_level(logging.INFO)
    with registry.temporarily(tool):
        call = request_call("rv_ay_login", {"shop": "north"}, alice, tenant="acme")

    assert call.status == CallStatus.FAILED
    assert "The vendor refused [secret]:[secret] for north." in call.error  # each string of the setting is secret
    assert PASSWORD not in call.error and PASSWORD not in call.error_detail
    assert "POST /login user=[secret] password=[secret]" in caplog.text
    assert PASSWORD not in caplog.text


def test_a_structured_secret_presets_password_is_scrubbed_from_the_result(
    request_call: RequestCall, alice: User, settings: Any
) -> None:
    """Found: as above, a tool echoing the password of a mapping preset in its result has it stored and shown.
    Expect: ``[secret]`` in its place.
    """
    setattr(settings, SETTING, {"user": "shop-42", "password": PASSWORD, "keys": ["k-rv-ay-0001", "k-rv-ay-0002"]})
    tool = Tool.from_function(_login_ok, name="rv_ay_login_ok", risk="low", presets={"account": Secret(SETTING)})
    with registry.temporarily(tool):
        call = request_call("rv_ay_login_ok", {"shop": "north"}, alice, tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert call.result == {"shop": "north", "request": {"user": "[secret]", "password": "[secret]"}}


# --- 2. a before interceptor's rewrite of a sensitive value, quoted by a later interceptor -------------------

CARD_AS_TYPED = "4111 1111 1111 1111"
CARD = "4111111111111111"


class NormaliseCard(Interceptor):
    """Strips the spaces a person types in a card number (the canonical use of a rewrite)."""

    name = "normalise_card"

    def before(self, call: InterceptedCall) -> Mapping[str, Any] | None:
        card = call.arguments.get("card")
        if isinstance(card, str) and " " in card:
            return {**call.arguments, "card": card.replace(" ", "")}
        return None


class BlockListLookup(Interceptor):
    """Looks the card up in a block list kept as a mapping (a missing card raises ``KeyError(card)``)."""

    name = "block_list"

    def before(self, call: InterceptedCall) -> Refuse | None:
        return None if {"5500000000000004": "ok"}[call.arguments["card"]] else None


def _pay(amount: Annotated[int, Param("Cents.")], card: Annotated[str, Param("The card number.")]) -> str:
    """Pay ``amount`` with the card."""
    return f"paid {amount}"


@pytest.mark.parametrize(
    "second",
    [
        {
            "class": "toolhub.interceptors.ArgumentPolicy",
            "options": {"rules": [{"tool": "rv_ay_pay", "path": "$.card", "deny": ["4111*"]}]},
        },
        "tests.security_review.test_review_2026_12_05_ay.BlockListLookup",
    ],
    ids=["refusal", "raised"],
)
def test_a_later_interceptor_quoting_a_rewritten_sensitive_value_has_it_scrubbed(
    request_call: RequestCall, alice: User, settings: Any, second: Any
) -> None:
    """Found: ``toolhub/call_arguments.py`` ``_intercepted_arguments`` scrubs an interceptor's refusal and a failed
    interceptor's traceback with the values of the arguments as they came in (``stored``). When an earlier
    interceptor rewrote a sensitive argument (a card number typed with spaces, normalised), the refusal of the
    built-in ``ArgumentPolicy`` ("The value '4111111111111111' at $.card ...") and a later interceptor's
    ``KeyError('4111111111111111')`` quote the rewritten value, which no scrubber knew: stored in the call's error
    and detail and the audit trail, and told to the model.
    Expect: every version of the arguments the interceptors saw is scrubbed from what they say.
    """
    settings.TOOLHUB = {
        **getattr(settings, "TOOLHUB", {}),
        "INTERCEPTORS": ["tests.security_review.test_review_2026_12_05_ay.NormaliseCard", second],
    }
    tool = Tool.from_function(_pay, name="rv_ay_pay", risk="low", sensitive=("card",))
    with registry.temporarily(tool):
        call = request_call("rv_ay_pay", {"amount": 5, "card": CARD_AS_TYPED}, alice, tenant="acme")

    assert call.status == CallStatus.DENIED
    shown = json.dumps(
        [call.error, call.error_detail, list(AuditEvent.objects.filter(call_id=call.id).values_list("data", flat=True))]
    )
    assert CARD not in shown and CARD_AS_TYPED not in shown
    if isinstance(second, dict):
        assert "The value '[secret]' at $.card" in call.error
    else:
        assert "KeyError" in call.error_detail
