"""Bad model output, fuzzed through the governed pipeline: no crash, nothing executed, every case recorded.

Each case is a tool call as a model can send it: malformed JSON argument strings, non-object JSON,
wrong types, missing and extra arguments, unknown and look-alike tool names, huge payloads, control
characters and NUL bytes, deep nesting. It goes through ``tool_call_request`` in the test
transaction with its commit callbacks captured and dropped, so nothing is dispatched. An oracle
written from the pipeline's documented rules says what should become of the call: only a valid one
may be queued (or held for approval); any other is recorded ``invalid`` or ``denied``, with an
error that says what to fix, is bounded, printable, and does not echo a huge input. The last test
drives bad calls end to end through the agent loop with the scripted model.

Hypothesis runs derandomized (the same cases in every run, in CI too) and keeps no example database.
"""

import json
import math
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_app.models import RunStatus
from agents_app.models_adapters.scripted import ScriptedAdapter
from agents_app.services import agent_create, run_start
from tests.fuzz.conftest import CASES
from tests.helpers import for_a_worker
from tests.testapp.models import SideEffect
from toolhub.audit_verify import verify_audit_chains
from toolhub.authorization import CallPrincipal
from toolhub.conf import toolhub_setting
from toolhub.feedback import default_unknown_tool_message
from toolhub.models import AuditEvent, CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db

MAX_BYTES = int(toolhub_setting("MAX_ARGUMENTS_BYTES"))
MAX_STRING = int(toolhub_setting("MAX_STRING_LENGTH"))
#: The longest error a model is told; a longer one would echo the input or bury the point.
MAX_ERROR_CHARS = 2000
#: Control and format characters, lone surrogates, line and paragraph separators: never raw in an error.
RAW_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: Inputs at least this long must not come back in the error (a prefix of them is looked for).
ECHO_PROBE = 100

TARGETS = [
    name
    for name in (
        "record_effect",
        "risky_effect",
        "slow_effect",
        "calculate",
        "create_order",
        "get_order",
        "days_between",
        "always_fails",
    )
    if name in registry
]
NAMES = sorted(registry.names())
ACCEPTED = {CallStatus.QUEUED, CallStatus.PENDING_APPROVAL}
ACTIONABLE = [
    re.compile(pattern)
    for pattern in (
        r"^Unknown tool ['\"]",
        r"nothing was executed",
        r"^Arguments are not valid JSON \(.*\); send a JSON object",
        r"^Arguments must be a JSON object",
        r"^Tool '.+' is (disabled|denied|not available)",
    )
]


def fuzz(examples: int) -> settings:
    """Deterministic hypothesis settings: the same ``examples`` cases in every run."""
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


# --- the oracle and the checks ------------------------------------------------------------------------


def _walk(value: Any) -> Iterator[Any]:
    """Every value and key inside ``value``, without recursion (inputs may be nested very deeply)."""
    stack = [value]
    while stack:
        item = stack.pop()
        yield item
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _unstorable(value: Any) -> bool:
    for item in _walk(value):
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, str):
            if "\x00" in item or len(item) > MAX_STRING:
                return True
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def expected_status(tool_name: str, arguments: Any, principal: CallPrincipal) -> str:
    """What the pipeline's rules make of this call: ``accepted``, ``invalid`` or ``denied``."""
    tool = registry.get(tool_name)
    if tool is None:
        return CallStatus.INVALID
    # Who may call it is decided before its arguments are read.
    if principal.agent_tools is not None and tool_name not in principal.agent_tools:
        return CallStatus.DENIED
    if arguments is None or arguments == "":
        parsed: Any = {}
    elif isinstance(arguments, str):
        if len(arguments.encode("utf-8", "surrogatepass")) > MAX_BYTES:
            return CallStatus.INVALID
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            return CallStatus.INVALID
    else:
        parsed = arguments
    if not isinstance(parsed, Mapping) or _unstorable(parsed):
        return CallStatus.INVALID
    try:
        size = len(json.dumps(parsed, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode())
        validated = tool.validate_arguments(parsed)
    except Exception:  # noqa: BLE001 - too deep to serialize, or not valid: either way refused
        return CallStatus.INVALID
    coerced = [v for v in validated.values() if isinstance(v, float | Decimal)]
    if size > MAX_BYTES or any(not math.isfinite(v) for v in coerced):
        return CallStatus.INVALID
    return "accepted"


def _long_strings(*values: Any) -> list[str]:
    found = []
    for value in values:
        if isinstance(value, str):
            try:
                value = [value, json.loads(value)]
            except (ValueError, RecursionError):
                pass
        found += [item for item in _walk(value) if isinstance(item, str) and len(item) >= ECHO_PROBE]
    return found


def assert_actionable(error: str, tool_name: str, arguments: Any) -> None:
    """The error says what to fix, is bounded and printable, and does not echo a huge input."""
    assert error, "a refused call must say why"
    assert len(error) <= MAX_ERROR_CHARS, f"error of {len(error)} characters: {error[:300]!r}..."
    raw = sorted({ch for ch in error if unicodedata.category(ch) in RAW_CATEGORIES and ch != "\n"})
    assert not raw, f"raw control characters {raw!r} in the error {error[:300]!r}"
    assert any(pattern.search(error) for pattern in ACTIONABLE), f"not actionable: {error[:300]!r}"
    for text in _long_strings(tool_name, arguments):
        assert text[:ECHO_PROBE] not in error, f"the error echoes an input of {len(text)} characters"


class Pipeline:
    """Requests calls in the test transaction, never dispatching them, and checks each outcome."""

    def __init__(self, test: str, capture: Callable[..., Any], user: User) -> None:
        self.test = test
        self.capture = capture
        self.user = user

    def principal(self, agent_tools: frozenset[str] | None) -> CallPrincipal:
        return CallPrincipal(
            user_id=self.user.pk,
            username=self.user.username,
            tenant="acme",
            agent_name="fuzzer" if agent_tools is not None else "",
            agent_tools=agent_tools,
        )

    def submit(self, tool_name: str, arguments: Any, agent_tools: frozenset[str] | None = None) -> ToolCall:
        principal = self.principal(agent_tools)
        want = expected_status(tool_name, arguments, principal)
        request = CallRequest(
            tool_name=tool_name,
            arguments=arguments,
            principal=principal,
            context=ToolContext(tenant="acme"),
            model_call_id="call_fuzz",
        )
        # Queued for a worker (not claimed by this process), and the commit never comes: nothing is dispatched.
        with for_a_worker(), self.capture(execute=False):
            call = tool_call_request(request=request)
        row = ToolCall.objects.get(pk=call.pk)
        events = list(AuditEvent.objects.filter(call_id=row.pk).order_by("seq").values_list("event_type", flat=True))
        assert (row.attempts, row.started_at, row.worker) == (0, None, ""), "the call was executed"
        if want == "accepted":
            assert row.status in ACCEPTED, f"a valid call became {row.status}: {row.error[:300]!r}"
            assert row.tool_name == tool_name
        else:
            assert row.status == want, f"expected {want}, got {row.status} ({row.error[:300]!r})"
            assert_actionable(row.error, tool_name, arguments)
            assert len(row.raw_arguments) <= 2000
        assert events == ["call.requested", f"call.{row.status}"], events
        CASES[(self.test, str(row.status))] += 1
        return row

    def finish(self) -> None:
        """Nothing ran, and the audit trail of every case verifies."""
        assert SideEffect.objects.count() == 0
        checked, problems = verify_audit_chains()
        assert problems == [], problems
        assert checked >= 2 * sum(count for (test, _), count in CASES.items() if test == self.test)


@pytest.fixture
def pipeline(
    request: pytest.FixtureRequest, alice: User, django_capture_on_commit_callbacks: Any
) -> Iterator[Pipeline]:
    fuzzer = Pipeline(request.node.name, django_capture_on_commit_callbacks, alice)
    yield fuzzer
    fuzzer.finish()


# --- strategies ---------------------------------------------------------------------------------------

text = st.text(max_size=30)  # hypothesis' text: any code point but surrogates, NUL included
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4), max_leaves=10
)
agent_tools = st.sampled_from([None, None, frozenset(TARGETS), frozenset({"record_effect", "calculate"})])

CONTROL = [
    "\x00", "\x01", "\x07", "\x08", "\t", "\n", "\r", "\x0b", "\x1b", "\x7f", "\x85", "\x9b",
    "\u2028", "\u2029", "\u200b", "\u200d", "\u202e", "\u2066", "\ufeff", "\ufffe", "\ud800", "\udfff",
]  # fmt: skip
HOMOGLYPHS = {
    "a": "\u0430", "c": "\u0441", "e": "\u0435", "i": "\u0456", "o": "\u043e", "p": "\u0440",
    "s": "\u0455", "x": "\u0445", "y": "\u0443", "d": "\u0501", "r": "\u0433", "_": "\uff3f",
}  # fmt: skip


def _schema(tool_name: str) -> tuple[dict[str, Any], list[str]]:
    """The tool's properties (references to ``$defs`` resolved) and required names."""
    schema = registry.get(tool_name).json_schema
    definitions = schema.get("$defs", {})
    properties = {
        key: {**definitions[prop["$ref"].rsplit("/", 1)[-1]], **prop} if "$ref" in prop else prop
        for key, prop in schema.get("properties", {}).items()
    }
    return properties, list(schema.get("required", []))


def valid_value(prop: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """A value the property accepts."""
    if "enum" in prop:
        return st.sampled_from(prop["enum"])
    if "anyOf" in prop:  # a Decimal amount: a number or a numeric string
        amounts = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("99999"), places=2)
        return amounts.map(str) | st.integers(1, 5000)
    kind = prop.get("type")
    if kind == "string" and prop.get("format") == "date":
        return st.dates().map(lambda day: day.isoformat())
    if kind == "string":
        letters = st.characters(exclude_categories=("Cs", "Cc"))
        return st.text(letters, min_size=max(1, prop.get("minLength", 0)), max_size=min(prop.get("maxLength", 40), 40))
    if kind == "number":
        return st.floats(min_value=0, max_value=1e6, allow_nan=False)
    if kind == "integer":
        return st.integers(1, 10**6)
    if kind == "boolean":
        return st.booleans()
    return json_values


def wrong_value(prop: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """A value of a JSON type the property does not take (or outside its enum)."""
    containers = st.lists(json_scalars, max_size=3) | st.dictionaries(text, json_scalars, max_size=3)
    if "enum" in prop:
        return st.text(max_size=4).filter(lambda s: s not in prop["enum"]) | st.integers() | st.none()
    if prop.get("type") == "string":
        return st.integers() | st.floats() | st.booleans() | st.none() | containers
    words = st.text(st.characters(categories=("L",)), min_size=1, max_size=8)
    wrong = words | st.none() | containers
    if prop.get("type") == "integer":
        wrong = wrong | st.floats(allow_nan=False).filter(lambda f: not f.is_integer())
    return wrong


@st.composite
def valid_arguments(draw: st.DrawFn, tool_name: str) -> dict[str, Any]:
    props, _ = _schema(tool_name)
    return {key: draw(valid_value(prop)) for key, prop in props.items()}


@st.composite
def encoded(draw: st.DrawFn, arguments: Any) -> Any:
    """The arguments as a model's raw text (compact, pretty, non-ASCII) or as a mapping (API clients)."""
    how = draw(st.sampled_from(["json", "json", "pretty", "mapping"]))
    if how == "mapping":
        return arguments
    if how == "pretty":
        return json.dumps(arguments, indent=2, ensure_ascii=False)
    return json.dumps(arguments)


@st.composite
def schema_violations(draw: st.DrawFn) -> tuple[str, Any]:
    """Wrong types, missing, extra, renamed and null arguments of a real tool."""
    name = draw(st.sampled_from(TARGETS))
    props, required = _schema(name)
    arguments = draw(valid_arguments(name))
    for _ in range(draw(st.integers(1, 3))):
        mutation = draw(st.sampled_from(["wrong_type", "missing", "extra", "renamed", "null"]))
        keys = sorted(arguments)
        if mutation == "wrong_type" and keys:
            key = draw(st.sampled_from(keys))
            arguments[key] = draw(wrong_value(props.get(key, {})))
        elif mutation == "missing" and set(required) & set(keys):
            del arguments[draw(st.sampled_from(sorted(set(required) & set(keys))))]
        elif mutation == "renamed" and keys:
            key = draw(st.sampled_from(keys))
            new = draw(st.sampled_from([key.upper(), key + "s", key + " ", " " + key, key.replace("_", ""), "_" + key]))
            arguments[new] = arguments.pop(key)
        elif mutation == "null" and keys:
            arguments[draw(st.sampled_from(keys))] = None
        else:
            extras = st.sampled_from(
                ["force", "id", "tenant", "user_id", "call_id", "idempotency_key", "ctx", "__proto__"]
            )
            arguments[draw(extras | text.filter(lambda k: k not in props))] = draw(json_values)
    return name, draw(encoded(arguments))


@st.composite
def malformed_json(draw: st.DrawFn) -> tuple[str, str]:
    """A JSON argument text broken the ways model output breaks."""
    name = draw(st.sampled_from(TARGETS))
    arguments = draw(valid_arguments(name) | st.dictionaries(text, json_values, min_size=1, max_size=3))
    good = json.dumps(arguments)
    kind = draw(
        st.sampled_from(
            [
                "truncated", "dropped", "inserted", "python", "trailing", "wrapped", "unquoted_keys",
                "single_quotes", "comment", "non_finite", "bad_escape", "raw_control", "text", "garbage",
            ]
        )
    )  # fmt: skip
    at = draw(st.integers(0, max(0, len(good) - 1)))
    if kind == "truncated":
        broken = good[:at]
    elif kind == "dropped":
        broken = good[:at] + good[at + 1 :]
    elif kind == "inserted":
        broken = good[:at] + draw(st.sampled_from(list('{}[],:"\\'))) + good[at:]
    elif kind == "python":
        broken = repr(arguments)
    elif kind == "trailing":
        broken = good + draw(st.sampled_from([",", "}", "]", " extra", "\n{}", ";", good]))
    elif kind == "wrapped":
        before, after = draw(st.sampled_from([("```json\n", "\n```"), ("Arguments: ", ""), ("<args>", "</args>")]))
        broken = before + good + after
    elif kind == "unquoted_keys":
        broken = re.sub(r'"([^"\\]*)":', r"\1:", good)
    elif kind == "single_quotes":
        broken = good.replace('"', "'")
    elif kind == "comment":
        broken = good[:-1] + " // the arguments\n}"
    elif kind == "non_finite":
        token = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]))
        broken = json.dumps({key: "\x00TOKEN" for key in arguments}).replace('"\\u0000TOKEN"', token)
    elif kind == "bad_escape":
        escape = draw(st.sampled_from(["\\x41", "\\u12", "\\", "\\q"]))
        broken = '{"' + draw(st.sampled_from(sorted(arguments))) + '": "' + escape + '"}'
    elif kind == "raw_control":
        broken = '{"note": "a' + draw(st.sampled_from([c for c in CONTROL if ord(c) < 0x20])) + 'b"}'
    elif kind == "text":
        broken = draw(st.text(max_size=200))
    else:
        broken = draw(st.binary(max_size=64)).decode("latin-1")
    return name, broken


non_object_json = (
    st.one_of(json_scalars, st.lists(json_values, max_size=5)).map(json.dumps)
    | st.sampled_from(["", " ", "\n", "null", "true", "0", "-1", "1e400", "[]", '""', '"{}"', '[{"note": "x"}]'])
    | st.dictionaries(st.just("note"), text, min_size=1).map(
        lambda args: json.dumps(json.dumps(args))
    )  # double-encoded
)


@st.composite
def look_alike_names(draw: st.DrawFn) -> str:
    """Tool names a model gets almost, or not at all, right."""
    base = draw(st.sampled_from(NAMES))
    kind = draw(
        st.sampled_from(
            [
                "typo", "case", "camel", "kebab", "homoglyph", "fullwidth", "invisible", "whitespace", "control",
                "prefixed", "long", "empty", "random",
            ]
        )
    )  # fmt: skip
    at = draw(st.integers(0, len(base) - 1))
    if kind == "typo":
        how = draw(st.sampled_from(["drop", "double", "swap", "replace"]))
        if how == "drop":
            name = base[:at] + base[at + 1 :]
        elif how == "double":
            name = base[:at] + base[at] + base[at:]
        elif how == "swap" and at + 1 < len(base):
            name = base[:at] + base[at + 1] + base[at] + base[at + 2 :]
        else:
            name = base[:at] + draw(st.sampled_from("abcdefghijklmnopqrstuvwxyz_0")) + base[at + 1 :]
    elif kind == "case":
        name = draw(st.sampled_from([base.upper(), base.title(), base.capitalize(), base.swapcase()]))
    elif kind == "camel":
        head, *rest = base.split("_")
        name = head + "".join(part.title() for part in rest)
    elif kind == "kebab":
        name = base.replace("_", draw(st.sampled_from(["-", " ", ".", ""])))
    elif kind == "homoglyph":
        name = "".join(HOMOGLYPHS.get(ch, ch) if draw(st.booleans()) else ch for ch in base)
    elif kind == "fullwidth":
        name = "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in base)
    elif kind == "invisible":
        name = base[:at] + draw(st.sampled_from(["\u200b", "\u200d", "\u00ad", "\ufeff", "\u2060"])) + base[at:]
    elif kind == "whitespace":
        name = (
            draw(st.sampled_from([" ", "\n", "\t", "\r\n", "\u00a0"])) + base + draw(st.sampled_from(["", " ", "\n"]))
        )
    elif kind == "control":
        name = base[:at] + draw(st.sampled_from(CONTROL)) + base[at:]
    elif kind == "prefixed":
        name = draw(st.sampled_from(["functions.", "tools/", "tool:", "default_api.", '"'])) + base
        name += draw(st.sampled_from(["", "()", '"', "(**args)"]))
    elif kind == "long":
        name = base * draw(st.integers(10, 20_000))
    elif kind == "empty":
        name = ""
    else:
        name = draw(st.text(max_size=100))
    if name in registry:  # a mutation that happens to give a real name: make it unknown
        name += "_x"
    return name


@st.composite
def huge_payloads(draw: st.DrawFn) -> tuple[str, Any]:
    """Beyond MAX_ARGUMENTS_BYTES or MAX_STRING_LENGTH, or with very many arguments."""
    name = draw(st.sampled_from(["record_effect", "risky_effect", "always_fails", "create_order"]))
    unit = draw(st.sampled_from(["a", "é", "\u4e2d", "\U0001f600", "ab ", '"', "\\"]))
    kind = draw(st.sampled_from(["long_value", "long_key", "huge_text", "many_keys", "big_list", "multibyte"]))
    key = "note" if name in ("record_effect", "risky_effect") else ("reason" if name == "always_fails" else "product")
    if kind == "long_value":
        arguments: Any = {key: unit * (MAX_STRING // len(unit) + draw(st.integers(1, 5000)))}
    elif kind == "long_key":
        arguments = {unit * (MAX_STRING + draw(st.integers(1, 100))): "x", key: "x"}
    elif kind == "huge_text":
        arguments = json.dumps({key: "x"})[:-1] + ', "pad": "' + "p" * (MAX_BYTES + draw(st.integers(0, 1000))) + '"}'
    elif kind == "many_keys":
        arguments = {f"{unit}{index}": index for index in range(draw(st.integers(100, 8000)))}
    elif kind == "big_list":
        arguments = {key: [draw(json_scalars)] * draw(st.integers(1000, 40_000))}
    else:
        arguments = {key: unit * draw(st.integers(MAX_STRING // 2, MAX_STRING))} | {
            f"{key}{index}": unit * (MAX_STRING // 2) for index in range(draw(st.integers(1, 8)))
        }
    if not isinstance(arguments, str) and draw(st.booleans()):
        arguments = json.dumps(arguments, ensure_ascii=draw(st.booleans()))
    return name, arguments


@st.composite
def control_characters(draw: st.DrawFn) -> tuple[str, Any]:
    """NUL bytes, control, format and separator characters and lone surrogates, anywhere a model puts text."""
    parts = draw(st.lists(st.sampled_from(CONTROL) | st.text(max_size=3), min_size=0, max_size=6))
    parts.append(draw(st.sampled_from(CONTROL)))
    bad = "".join(draw(st.permutations(parts)))
    name = draw(st.sampled_from(["record_effect", "risky_effect", "always_fails", "create_order"]))
    arguments = draw(valid_arguments(name))
    key = sorted(key for key, value in arguments.items() if isinstance(value, str))[0]
    spot = draw(st.sampled_from(["value", "key", "name", "raw_value", "escaped_value"]))
    if spot == "value":
        arguments[key] = bad
        return name, draw(
            st.sampled_from([arguments, json.dumps(arguments), json.dumps(arguments, ensure_ascii=False)])
        )
    if spot == "key":
        arguments[bad] = "x"
        return name, draw(st.sampled_from([arguments, json.dumps(arguments)]))
    if spot == "name":
        return draw(st.sampled_from([name + bad, bad + name, bad])), json.dumps(arguments)
    if spot == "raw_value":
        return name, '{"' + key + '": "' + bad + '"}'
    escaped = "".join(f"\\u{ord(ch):04x}" for ch in bad if ord(ch) <= 0xFFFF)
    return name, '{"' + key + '": "' + escaped + '"}'


class Nested:
    """Arguments nested ``depth`` levels deep, built when used (too deep for hypothesis to print)."""

    def __init__(self, depth: int, shape: str, where: str) -> None:
        self.depth, self.shape, self.where = depth, shape, where

    def __repr__(self) -> str:
        return f"Nested(depth={self.depth}, shape={self.shape!r}, where={self.where!r})"

    def build(self) -> Any:
        if self.where == "mapping":  # as an API client would pass it
            value: Any = 1
            for _ in range(self.depth):
                value = [value] if self.shape == "list" else {"a": value}
            return {"note": value}
        opening, closing = ("[", "]") if self.shape == "list" else ('{"a": ', "}")
        nested = opening * self.depth + "1" + closing * self.depth
        return nested if self.where == "top" else '{"note": ' + nested + "}"


@st.composite
def deep_nesting(draw: st.DrawFn) -> tuple[str, Nested]:
    """Arrays and objects nested from a few levels to far beyond any recursion limit."""
    depth = draw(st.integers(1, 3000) | st.sampled_from([99, 100, 101, 500, 900, 950, 980, 990, 1000, 5000, 60_000]))
    shape = draw(st.sampled_from(["list", "object"]))
    return "record_effect", Nested(depth, shape, draw(st.sampled_from(["value", "top", "mapping"])))


@st.composite
def valid_calls(draw: st.DrawFn) -> tuple[str, Any]:
    name = draw(st.sampled_from(TARGETS))
    return name, draw(encoded(draw(valid_arguments(name))))


# --- the fuzz tests ------------------------------------------------------------------------------------


@fuzz(700)
@given(case=malformed_json(), tools=agent_tools)
def test_malformed_json_arguments(pipeline: Pipeline, case: tuple[str, str], tools: Any) -> None:
    pipeline.submit(*case, agent_tools=tools)


@fuzz(250)
@given(name=st.sampled_from(TARGETS), arguments=non_object_json)
def test_non_object_json_arguments(pipeline: Pipeline, name: str, arguments: str) -> None:
    pipeline.submit(name, arguments)


@fuzz(700)
@given(case=schema_violations(), tools=agent_tools)
def test_wrong_types_missing_and_extra_arguments(pipeline: Pipeline, case: tuple[str, Any], tools: Any) -> None:
    pipeline.submit(*case, agent_tools=tools)


@fuzz(600)
@given(name=look_alike_names(), arguments=st.sampled_from(["{}", '{"note": "x"}', "", "{"]))
def test_unknown_and_look_alike_tool_names(pipeline: Pipeline, name: str, arguments: str) -> None:
    call = pipeline.submit(name, arguments)
    assert call.status == CallStatus.INVALID and call.error.startswith("Unknown tool")


@fuzz(200)
@given(case=huge_payloads())
def test_huge_payloads(pipeline: Pipeline, case: tuple[str, Any]) -> None:
    call = pipeline.submit(*case)
    assert call.status == CallStatus.INVALID


@fuzz(500)
@given(case=control_characters(), tools=agent_tools)
def test_control_characters_nul_bytes_and_lone_surrogates(
    pipeline: Pipeline, case: tuple[str, Any], tools: Any
) -> None:
    call = pipeline.submit(*case, agent_tools=tools)
    if call.status in ACCEPTED:  # a tab or a bidi mark in free text is fine; what is stored is what was sent
        assert all(isinstance(value, str | int | float) for value in call.arguments.values())


@fuzz(200)
@given(case=deep_nesting())
def test_deeply_nested_json(pipeline: Pipeline, case: tuple[str, Nested]) -> None:
    name, nested = case
    call = pipeline.submit(name, nested.build())
    assert call.status == CallStatus.INVALID


@fuzz(150)
@given(case=valid_calls(), tools=agent_tools)
def test_valid_calls_are_queued_or_held_never_run_here(pipeline: Pipeline, case: tuple[str, Any], tools: Any) -> None:
    call = pipeline.submit(*case, agent_tools=tools)
    assert call.status in ACCEPTED or call.status == CallStatus.DENIED


# --- end to end: the agent loop with the scripted model --------------------------------------------------

E2E_TOOLS = [name for name in ("record_effect", "calculate", "always_fails", "get_order") if name in registry]

model_tool_calls = st.one_of(
    malformed_json(),
    st.tuples(look_alike_names(), st.sampled_from(["{}", '{"note": "x"}'])),
    st.tuples(st.sampled_from(E2E_TOOLS), non_object_json),
    control_characters().filter(lambda case: isinstance(case[1], str)),
    deep_nesting().filter(lambda case: case[1].where != "mapping").map(lambda case: (case[0], case[1].build())),
    schema_violations().filter(lambda case: isinstance(case[1], str)),
    st.tuples(st.just("record_effect"), st.just('{"note": "valid"}')),
)


@pytest.fixture
def audited() -> Iterator[None]:
    """The audit trail of everything the test did verifies at its end."""
    yield
    checked, problems = verify_audit_chains()
    assert problems == [], problems
    assert checked > 0


@fuzz(120)
@given(calls=st.lists(model_tool_calls, min_size=1, max_size=3))
def test_bad_tool_calls_end_to_end_through_the_agent_loop(
    audited: None, calls: list[tuple[str, str]], alice: User, django_capture_on_commit_callbacks: Any
) -> None:
    # given a scripted model whose turn asks for these calls, with raw argument text
    agent = agent_create(name=f"fuzz-{uuid.uuid4().hex[:12]}", provider="scripted", script=[], tools=E2E_TOOLS)
    script = [
        {"tool_calls": [{"name": name, "arguments": arguments} for name, arguments in calls]},
        {"content": "Done: {last_tool_result}"},
    ]
    # (the script is played from memory: a model's NUL characters never reach the agent's JSON column)
    with mock.patch("agents_app.loop.adapter_for", return_value=ScriptedAdapter(script=script)):
        # when the run goes as far as it can, Celery eager, every commit callback run
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=alice, input="fuzz")
    run.refresh_from_db()

    # then every call is recorded, answered in order, and only valid ones ran, once
    recorded = list(ToolCall.objects.filter(run_id=run.id).order_by("turn", "position"))
    assert len(recorded) == len(calls)
    assert run.status == RunStatus.COMPLETED, (run.status, run.error)
    answers = [message["content"] for message in run.messages if message["role"] == "tool"]
    # a call denied a tool the agent does not have reads as an unknown tool (its row keeps the denial)
    offered = E2E_TOOLS
    assert answers == [
        default_unknown_tool_message(call.tool_name, offered)
        if call.status == CallStatus.DENIED and call.tool_name not in E2E_TOOLS
        else call.model_text()
        for call in recorded
    ]
    for call, (name, arguments) in zip(recorded, calls, strict=True):
        if call.status in (CallStatus.INVALID, CallStatus.DENIED):
            assert_actionable(call.error, name, arguments)
        CASES[("test_bad_tool_calls_end_to_end_through_the_agent_loop", str(call.status))] += 1
    ran = [call for call in recorded if call.status == CallStatus.SUCCEEDED and call.tool_name == "record_effect"]
    assert SideEffect.objects.filter(call_id__in=[str(call.id) for call in recorded]).count() == len(ran)
    assert all(call.attempts <= 1 for call in recorded)
