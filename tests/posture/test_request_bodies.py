"""Bad request bodies never answer 500: nested too deep, or holding text no column can store -> 400, nothing written.

Every POST endpoint under /api/v1/ is found by walking the URL resolver, so a new endpoint is covered
without touching this file.
"""

import io
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.exceptions import ParseError
from rest_framework.test import APIClient

from approvals.models import ApprovalDecision, ApprovalRequest, ApprovalStatus
from tests.helpers import principal_for
from tests.testapp.models import SideEffect
from toolhub.api.parsers import StorableJSONParser, json_nesting_depth
from toolhub.models import CallStatus
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext

pytestmark = pytest.mark.django_db

DEPTH = 5_000
#: A value for each kind of path parameter; an unknown converter fails the test so it is added here.
SAMPLES: dict[str, Callable[[], str]] = {
    "int": lambda: "2147483000",
    "uuid": lambda: str(uuid.uuid4()),
    "str": lambda: "sample",
    "slug": lambda: "sample",
    "path": lambda: "sample",
}
_PARAMETER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>\w+)>")


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern


def post_endpoints() -> list[str]:
    """Every path under /api/v1/ whose view accepts POST, with its parameters filled in."""
    paths = []
    for route, pattern in _routes(get_resolver().url_patterns):
        view = getattr(pattern.callback, "cls", None) or getattr(pattern.callback, "view_class", None)
        if not route.startswith("api/v1/") or not hasattr(view, "post"):
            continue
        converters = {match["converter"] or "str" for match in _PARAMETER.finditer(route)}
        assert converters <= set(SAMPLES), f"add a sample value for the path converter(s) {converters - set(SAMPLES)}"
        paths.append("/" + _PARAMETER.sub(lambda match: SAMPLES[match["converter"] or "str"](), route))
    return paths


def nested_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def nested_list(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_every_post_endpoint_is_found() -> None:
    found = {re.sub(r"[0-9a-f-]{36}|\d{6,}", "<id>", path) for path in post_endpoints()}

    assert {
        "/api/v1/agents/",
        "/api/v1/runs/",
        "/api/v1/runs/<id>/retry/",
        "/api/v1/runs/<id>/rollback/",
        "/api/v1/approvals/<id>/approve/",
        "/api/v1/approvals/<id>/reject/",
        "/api/v1/calls/<id>/result/",
    } <= found


@pytest.mark.parametrize("body", [nested_object(DEPTH), nested_list(DEPTH)], ids=["objects", "lists"])
@pytest.mark.parametrize("path", post_endpoints())
def test_a_body_nested_thousands_deep_is_refused_everywhere(
    superuser_client: APIClient, row_counts: Callable[[], dict[str, int]], path: str, body: str
) -> None:
    # given
    before = row_counts()

    # when
    response = superuser_client.post(path, body, content_type="application/json")

    # then
    assert row_counts() == before
    if response.status_code == 404:
        # The path names no object: the view never reads a body (the check runs where one is read, after
        # authentication), and an ordinary body gets the same answer.
        assert superuser_client.post(path, "{}", content_type="application/json").status_code == 404
        return
    assert response.status_code == 400, (path, response.status_code, response.content[:300])
    assert response.json() == {
        "detail": f"The request body nests lists and objects {DEPTH} levels deep; at most 200 are accepted. "
        "Nothing was done."
    }


def test_an_endpoint_that_would_act_does_nothing_with_such_a_body(
    superuser_client: APIClient, hold: Callable[..., ApprovalRequest], alice: User
) -> None:
    pending = hold(alice)

    response = superuser_client.post(
        f"/api/v1/approvals/{pending.pk}/approve/", nested_object(DEPTH), content_type="application/json"
    )

    assert response.status_code == 400
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING
    assert not ApprovalDecision.objects.exists()
    assert not SideEffect.objects.exists()


@pytest.fixture
def hold(django_capture_on_commit_callbacks: Any) -> Callable[..., ApprovalRequest]:
    """Request a high-risk call for ``user``; return its (pending) approval request."""

    def request(user: User) -> ApprovalRequest:
        with django_capture_on_commit_callbacks(execute=True):
            call = tool_call_request(
                request=CallRequest(
                    tool_name="risky_effect",
                    arguments={"note": "careful"},
                    principal=principal_for(user, tenant="acme"),
                    context=ToolContext(),
                )
            )
        return ApprovalRequest.objects.get(call=call)

    return request


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"note": "a\\u0000b"}', "arguments.note contains a NUL character"),
        ('{"note": "\\ud800"}', "arguments.note contains an invalid character (a lone surrogate)"),
        ('{"no\\u0000te": "x"}', "a key contains a NUL character"),
        ('{"\\udfff": "x"}', "a key contains an invalid character (a lone surrogate)"),
    ],
    ids=["nul", "lone-surrogate", "nul-in-key", "lone-surrogate-in-key"],
)
def test_edited_approval_arguments_the_database_cannot_store_are_refused(
    operator_client: APIClient,
    hold: Callable[..., ApprovalRequest],
    alice: User,
    row_counts: Callable[[], dict[str, int]],
    arguments: str,
    problem: str,
) -> None:
    # given a pending request; the edit arrives as ASCII JSON text with escapes, as clients send it
    pending = hold(alice)
    before = row_counts()
    body = '{"comment": "edited", "arguments": ' + arguments + "}"

    # when
    response = operator_client.post(f"/api/v1/approvals/{pending.pk}/approve/", body, content_type="application/json")

    # then
    assert response.status_code == 400
    assert response.json() == {
        "detail": f"The request body cannot be stored: {problem}. Remove it or write it out as text; nothing was done."
    }
    assert row_counts() == before
    pending.refresh_from_db()
    assert (pending.status, pending.call.status) == (ApprovalStatus.PENDING, CallStatus.PENDING_APPROVAL)


def test_a_body_at_the_nesting_limit_still_reaches_the_view(alice_client: APIClient) -> None:
    # 200 levels in all: the body's object, and 199 in the run's context
    context = json.loads(nested_object(199))
    body = json.dumps({"agent": "no-such-agent", "input": "hi", "context": context})

    response = alice_client.post("/api/v1/runs/", body, content_type="application/json")

    assert response.status_code == 400
    # the view's own answer: it looked the agent up, so the body got through the parser
    assert response.json() == {
        "detail": "Unknown agent 'no-such-agent' among your tenant's agents and the global ones."
    }


def test_the_limit_is_a_setting(alice_client: APIClient) -> None:
    body = json.dumps({"agent": "no-such-agent", "input": "hi", "context": json.loads(nested_object(8))})

    with override_settings(TOOLHUB={"MAX_REQUEST_NESTING": 5}):
        response = alice_client.post("/api/v1/runs/", body, content_type="application/json")

    assert response.status_code == 400
    assert "nests lists and objects 9 levels deep; at most 5 are accepted" in response.json()["detail"]


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[", "}}}", "\\"[[["]', 1),  # brackets in strings, escaped quotes
        ('["\\\\", ["]"]]', 2),  # an escaped backslash does not escape the quote after it
        ('["\\\\\\"[", []]', 2),  # an escaped backslash, then an escaped quote: the string goes on
        ('[["a\\\n[", [1]]]', 3),  # a backslash takes a newline along like any character
        ('[1, "[[[[', 1),  # an open string runs to the end: json.loads stops there, nothing after it nests
        ('[[{"a": "\\"\\"\\"]]', 3),  # an open string of escaped quotes, brackets before it still count
        ('[1, "abc\\', 1),  # a backslash at the very end
        (nested_list(DEPTH * 10), DEPTH * 10),
    ],
)
def test_nesting_is_measured_on_the_text_without_recursion(text: str, depth: int) -> None:
    assert json_nesting_depth(text) == depth


def test_brackets_before_an_open_string_are_still_refused(superuser_client: APIClient) -> None:
    body = "[" * DEPTH + '"' + '\\"' * 1_000

    response = superuser_client.post("/api/v1/runs/", body, content_type="application/json")

    assert response.status_code == 400
    assert f"nests lists and objects {DEPTH} levels deep" in response.json()["detail"]


#: Bodies of about 200 KB that no client sends: open strings, quotes, escapes and brackets in long runs.
ADVERSARIAL_BODIES = {
    "open-string-of-escaped-quotes": '"' + '\\"' * 100_000,
    "the-same-ending-in-a-backslash": '"' + '\\"' * 100_000 + "\\",
    "escaped-quotes-and-escaped-newlines": '"' + '\\"\\\n' * 50_000,
    "escaped-backslashes": '{"a": "' + "\\\\" * 100_000,
    "quotes": '"' * 200_000,
    "open-strings-in-lists": '["' * 100_000,
    "open-strings-of-brackets": '"[' * 100_000,
    "brackets-in-escaped-quotes": '"\\"[\\"{' * 50_000,
}


@pytest.mark.parametrize("body", ADVERSARIAL_BODIES.values(), ids=ADVERSARIAL_BODIES.keys())
def test_a_long_adversarial_body_is_refused_in_linear_time(superuser_client: APIClient, body: str) -> None:
    # any logged-in caller can send these (an anonymous one is answered before its body is read: below)
    started = time.monotonic()
    response = superuser_client.post("/api/v1/calls/", data=body, content_type="application/json")
    elapsed = time.monotonic() - started

    assert response.status_code == 400
    assert elapsed < 1.0, f"{len(body) // 1000} KB held the worker for {elapsed:.1f} s"  # linear: ~10 ms


@pytest.mark.parametrize("body", ADVERSARIAL_BODIES.values(), ids=ADVERSARIAL_BODIES.keys())
def test_an_anonymous_body_is_not_read(body: str) -> None:
    response = Client().post("/api/v1/calls/", data=body, content_type="application/json")

    assert response.status_code in (401, 403)


def test_the_parser_refuses_what_json_loads_would_crash_on() -> None:
    with pytest.raises(ParseError, match="levels deep"):
        StorableJSONParser().parse(io.BytesIO(nested_list(100_000).encode()), "application/json", {})
    with pytest.raises(RecursionError):
        json.loads(nested_list(100_000))  # what DRF's own JSONParser does, and a RecursionError is a 500
