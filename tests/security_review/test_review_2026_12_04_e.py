"""Review of 2026-12-04 (e): remote MCP invisible characters, JSON Schema formats, tenant argument spellings.

Each test fails on the reviewed code (main at 8d4fb7b) and states what was found and what is expected.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from pydantic import BaseModel

from tests.helpers import RequestCall
from toolhub import Tool, registry
from toolhub.mcp_client.definitions import definition_diff, visible_text
from toolhub.models import CallStatus
from toolhub.tools.jsonschema_args import validate_against_schema

RAN: list[Any] = []


@pytest.fixture(autouse=True)
def _ran() -> Any:
    RAN.clear()
    yield
    RAN.clear()


# --- e2e60a7: the acceptance diff writes out invisible characters --------------------------------------------

INVISIBLE_NOT_ESCAPED = [
    "\U000e0101",  # VARIATION SELECTOR-18 (Mn): the "emoji smuggling" carrier, drawn as nothing
    "\ufe0e",  # VARIATION SELECTOR-15 (Mn) after a letter: drawn as nothing
    "\u034f",  # COMBINING GRAPHEME JOINER (Mn, default-ignorable)
    "\u3164",  # HANGUL FILLER (Lo, default-ignorable): drawn as blank
    "\u115f",  # HANGUL CHOSEONG FILLER (Lo, default-ignorable)
    "\uffa0",  # HALFWIDTH HANGUL FILLER (Lo, default-ignorable)
]


@pytest.mark.parametrize("char", INVISIBLE_NOT_ESCAPED)
def test_definition_diff_writes_out_default_ignorable_characters(char: str) -> None:
    """Found: ``visible_text`` escapes only categories Cf/Cc/Co/Cs/Zl/Zp, so default-ignorable characters of
    other categories (variation selectors U+FE00-FE0F and U+E0100-E01EF, the Hangul fillers, the combining
    grapheme joiner) stay raw in the acceptance diff: a remote description can carry a hidden instruction
    encoded in variation selectors ("emoji smuggling") that a model reads and the administrator never sees.

    Expect: every Default_Ignorable_Code_Point (other than a plain newline) is written out as an escape.
    """
    hidden = "Reads the weather." + char * 3
    diff = definition_diff({"name": "w", "description": "Reads the weather."}, {"name": "w", "description": hidden})
    assert char not in diff
    assert char not in visible_text(hidden)


def test_visible_text_keeps_cjk_and_emoji_readable() -> None:
    """Found: (guard for the fix above) CJK and accented text must stay readable.

    Expect: ordinary letters of any script come out unchanged.
    """
    text = "天気を読む — météo, 날씨"
    assert visible_text(text) == text


# --- 53abd57: formats asserted with the draft's FORMAT_CHECKER --------------------------------------------------


def _regex_tool() -> Tool:
    schema = {
        "type": "object",
        "properties": {"pattern": {"type": "string", "format": "regex"}},
        "required": ["pattern"],
    }
    return Tool.create("grep_logs", "Search logs.", schema, lambda arguments: RAN.append(arguments["pattern"]))


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?<year>\d{4})-(?<month>\d{2})",  # ECMA-262 named groups (ES2018)
        r"^\p{L}+$",  # ECMA-262 Unicode property escape (identity escape without the u flag)
        r"\k<year>|(?<year>x)",  # ECMA-262 named backreference
    ],
)
def test_a_valid_ecma_262_regex_is_accepted_by_format_regex(pattern: str) -> None:
    """Found: the ``regex`` format is checked with Python's ``re.compile``, but JSON Schema defines it as an
    ECMA-262 regular expression: a valid JavaScript pattern the model writes from the published schema (named
    groups ``(?<name>...)``, ``\\p{L}``, ``\\k<name>``) is now refused as invalid, and the tool never runs.

    Expect: a valid ECMA-262 pattern passes the format check (check it with an ECMA-262 dialect, or leave
    ``regex`` unasserted as ``uri`` is).
    """
    schema = {"type": "object", "properties": {"pattern": {"type": "string", "format": "regex"}}}
    assert validate_against_schema("grep_logs", schema, {"pattern": pattern}) == {"pattern": pattern}


@pytest.mark.django_db
def test_a_call_with_an_ecma_named_group_runs(request_call: RequestCall, alice: User) -> None:
    """Found: end to end, a hand-written tool whose schema says ``format: regex`` refuses a valid ECMA-262
    pattern (``(?<year>\\d{4})``) as ``invalid``; before 53abd57 the call ran.

    Expect: the call succeeds.
    """
    with registry.temporarily(_regex_tool()):
        call = request_call("grep_logs", {"pattern": r"(?<year>\d{4})"}, alice)

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert RAN == [r"(?<year>\d{4})"]


# --- a88570a: tenant arguments in any spelling -------------------------------------------------------------------


class Target(BaseModel):
    tenant_id: str
    account: str


class Transfer(BaseModel):
    target: Target
    amount: int


def _transfer(request: Transfer) -> str:
    RAN.append(request.target.tenant_id)
    return "moved"


nested_transfer = Tool.from_function(_transfer, name="nested_transfer", description="Move money.", input_model=Transfer)


@pytest.mark.django_db
def test_a_nested_models_tenant_field_naming_another_tenant_is_denied(request_call: RequestCall, alice: User) -> None:
    """Found: ``tenant_argument_denial`` reads only the top-level keys, and ``_check_tenant_alias`` only the
    top-level fields: a tenant field one model down (``target.tenant_id``) names another tenant and the tool
    runs with it (as does a nested field hidden under any alias).

    Expect: a tenant argument is checked at any depth of the arguments (or a nested model holding a field
    named as one is refused at definition), and this call is denied without running.
    """
    with registry.temporarily(nested_transfer):
        call = request_call(
            "nested_transfer", {"target": {"tenant_id": "globex", "account": "A-1"}, "amount": 5}, alice
        )

    assert call.status == CallStatus.DENIED, (call.status, call.error)
    assert RAN == []
