"""Review of 2026-12-06 (ch): review by's answer headers, review cd's pattern weight cache, review cb's catalogue.

Findings (fixed):

1. ``answer_headers`` raised on what it was handed rather than made: a query string Django cannot read as UTF-8 (a
   raw byte past ASCII, as a server may hand it on undecoded; Django answers its own such requests 400) raised
   ``UnicodeDecodeError``, and a header Django would not write (a name past ASCII) ``UnicodeEncodeError``. On
   ``/mcp`` that was at the answer's start, after the tool had run: its result was lost to a server error; the body
   bound's 413 crashed the same way. The stand-in request no longer reads the query string (no header depends on
   it) and a header the stand-in refuses is passed on as it came, the server's to judge.
2. ``/mcp`` ignored ``SECURE_SSL_REDIRECT`` (on by default in production): Django redirected plain HTTP to HTTPS,
   ``/mcp`` ran tool calls sent over plain HTTP and answered their results in clear. ``with_answer_headers`` now
   answers what Django's ``SecurityMiddleware`` answers before any view (the 301 to HTTPS), the MCP app not reached.

Checked and holding: ``/mcp``'s event stream is not buffered (each body message is passed on as sent, unchanged,
and only ``http.response.start`` is touched: the cost is one stand-in per answer, not per message); several
``Set-Cookie`` headers are kept as sent; HSTS is added to ``/mcp``'s answers over HTTPS when
``SECURE_HSTS_SECONDS`` is set (and not over HTTP); Django's answers (streaming CSV exports and downloads
included) only get header changes from ``PrivateAnswersMiddleware``, which runs inside ``SecurityMiddleware`` and
before any ``ConditionalGetMiddleware`` (none is installed: a ``no-store`` answer takes no ETag, no 304); a HEAD
answer is the GET's headers. The pattern weight cache (``linear_patterns.pattern_weight``) keys on the pattern's
16-byte BLAKE2b digest and stores a weight that depends on the pattern and the engine's fixed bound only (pydantic-
core's ``size_limit`` is not configurable, ``ENGINE_PATTERN_BYTES`` a constant), so no weight probed under one limit
is reused under another; reads and writes hold its lock, two threads probing one new pattern at once probe it twice
and store the same weight; at most 4,096 entries of a few dozen bytes each are kept (oldest first out). The REST
catalogue names groups from one query of the catalogue's group names and the governance-cached group rows (one per
answer, not per tool: test below), and ``?group=`` with a withheld name answers as a name no tool has (an empty page,
no cursors).
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from tests.posture.test_api_query_counts import Rows, read, rows
from toolhub.asgi_body import bounded_body
from toolhub.catalogue import tool_catalogue_sync
from toolhub.models import Tenant, ToolGroup
from toolhub.response_headers import with_answer_headers
from toolhub.tools.definition import Tool
from toolhub.tools.registry import registry
from toolhub.withheld_names import withheld_label

__all__ = ["rows"]  # the API query counts' fixture, used here


def _run(app: Any, scope: dict[str, Any], sent: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The messages ``app`` (``with_answer_headers`` or the body bound around one) sent for ``scope``."""
    sent = [] if sent is None else sent

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    # on a thread of its own: the browser tests' event loop may be running in this one
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, app(scope, receive, send)).result()
    return sent


def _scope(path: str = "/mcp", query: bytes = b"", scheme: str = "http", **more: Any) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "scheme": scheme,
        "path": path,
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"testserver"), *more.pop("headers", [])],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 443 if scheme == "https" else 80),
        **more,
    }


def _tool_result(start_headers: list[tuple[bytes, bytes]], seen_by_client: list[dict[str, Any]] | None = None) -> Any:
    """An app answering a tool's result on an event stream, in two messages."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": start_headers})
        await send(
            {"type": "http.response.body", "body": b'event: message\ndata: {"result": 1}\n\n', "more_body": True}
        )
        if seen_by_client is not None:
            # streamed, not buffered: the first message is out before the second is made
            assert [m["type"] for m in seen_by_client] == ["http.response.start", "http.response.body"]
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def _headers(start: dict[str, Any]) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in start["headers"]}


def _stored_nowhere(cache_control: str) -> bool:
    directives = {part.strip().split("=")[0] for part in cache_control.split(",")}
    return {"private", "no-store"} <= directives


STREAM = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform")]


def test_a_tool_result_on_mcp_survives_a_query_string_django_cannot_read() -> None:
    """Found: ``/mcp?x=<byte 0xff>`` (a server may hand the query string on undecoded): ``answer_headers`` raised
    ``UnicodeDecodeError`` building its stand-in request at the answer's start, after the tool ran, and its result was
    lost to a server error. Expect: the result answered, with Django's headers."""
    # when
    sent = _run(with_answer_headers(_tool_result(STREAM)), _scope(query=b"x=\xff"))
    # then
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body", "http.response.body"]
    assert b'"result": 1' in sent[1]["body"]
    headers = _headers(sent[0])
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert _stored_nowhere(headers["cache-control"]) and "no-transform" in headers["cache-control"]


def test_a_header_django_would_not_write_is_passed_on_and_the_others_still_get_theirs() -> None:
    """Found: a header of the MCP app's that Django's ``HttpResponse`` refuses (a name past ASCII) made
    ``answer_headers`` raise ``UnicodeEncodeError`` at the answer's start, the tool result lost. Expect: that header
    passed on as it came (the server's to judge), the answer's other headers and Django's as for any answer."""
    odd = (b"x-\xe9tat", b"1")
    # when
    sent = _run(with_answer_headers(_tool_result([*STREAM, odd])), _scope())
    # then
    assert odd in sent[0]["headers"]
    headers = _headers(sent[0])
    assert headers["content-type"] == "text/event-stream"
    assert headers["referrer-policy"] == "same-origin" and "frame-ancestors" in headers["content-security-policy"]
    assert _stored_nowhere(headers["cache-control"])
    assert b'"result": 1' in sent[1]["body"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
def test_the_body_bounds_refusal_answers_a_query_string_django_cannot_read() -> None:
    """Found: the body bound's 413 to ``/admin/login/?x=<byte 0xff>`` raised building its headers (a server error).
    Expect: the 413 with Django's headers."""

    async def unreached(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a body over the bound reached the app")

    scope = _scope(path="/admin/login/", query=b"x=\xff", headers=[(b"content-length", b"20000")])
    # when
    sent = _run(bounded_body(unreached), scope)
    # then
    assert sent[0]["status"] == 413
    assert _headers(sent[0])["x-content-type-options"] == "nosniff"
    assert _stored_nowhere(_headers(sent[0])["cache-control"])


@override_settings(SECURE_SSL_REDIRECT=True)
def test_mcp_over_plain_http_is_redirected_to_https_as_djangos_pages_are() -> None:
    """Found: with ``SECURE_SSL_REDIRECT`` (production's default) Django redirected plain HTTP to HTTPS, but ``/mcp``
    (the Starlette app beside Django) ran the tool call and answered its result over plain HTTP. Expect: the same 301
    to HTTPS Django answers, with its headers, the MCP app never reached; over HTTPS the call answered as before."""
    reached: list[str] = []

    def mcp(scope: Any, receive: Any, send: Any) -> Any:
        reached.append(scope["scheme"])
        return _tool_result(STREAM)(scope, receive, send)

    # when
    plain = _run(with_answer_headers(mcp), _scope())
    secure = _run(with_answer_headers(mcp), _scope(scheme="https"))
    stranger = _run(with_answer_headers(mcp), {**_scope(), "headers": [(b"host", b"evil.example")]})
    # then
    assert plain[0]["status"] == 301 and _headers(plain[0])["location"] == "https://testserver/mcp"
    assert _headers(plain[0])["x-content-type-options"] == "nosniff"
    assert stranger[0]["status"] == 400  # a host Django refuses is not redirected to (Django answers it 400)
    assert reached == ["https"]
    assert secure[0]["status"] == 200 and b'"result": 1' in secure[1]["body"]


@override_settings(SECURE_HSTS_SECONDS=3600)
def test_mcp_answers_stream_keep_their_cookies_and_carry_hsts_over_https() -> None:
    """Holds (no finding): each body message passed on as sent, before the next is made; several ``Set-Cookie``
    kept as sent; HSTS over HTTPS when configured, not over HTTP."""
    cookies = [(b"set-cookie", b"a=1; Secure"), (b"set-cookie", b"b=2; Secure")]
    sent: list[dict[str, Any]] = []
    # when
    _run(with_answer_headers(_tool_result([*STREAM, *cookies], seen_by_client=sent)), _scope(scheme="https"), sent)
    plain = _run(with_answer_headers(_tool_result(STREAM)), _scope())
    # then
    assert [m for m in sent[0]["headers"] if m[0] == b"set-cookie"] == cookies
    assert _headers(sent[0])["strict-transport-security"] == "max-age=3600"
    assert "strict-transport-security" not in _headers(plain[0])
    assert sent[1:] == plain[1:]


def _grouped(note: str) -> str:
    """A tool of a group of its own."""
    return note


def _grouped_tools(rows: Rows, count: int) -> None:
    """``count`` tools, each in a group of its own with a row: every other one's rules name only globex."""
    added = []
    for number in rows.top_up("grouped", count):
        name = f"zz_grouped_{number:03}"
        rules = [{"tenants": ["globex"]}] if number % 2 else []
        ToolGroup.objects.create(name=f"{name}_group", activation_rules=rules)
        added.append(Tool.from_function(_grouped, name=name, group=f"{name}_group"))
    rows.stack.enter_context(registry.temporarily(*added))
    tool_catalogue_sync()


@pytest.mark.django_db
def test_the_catalogue_names_groups_at_one_cost_for_many_tools_and_groups(
    rows: Rows, operator: User, tenant: Tenant
) -> None:
    """Holds (no finding): GET /api/v1/tools/ naming each tool's group as acme's operator reads it costs as many
    queries for 8 tools in 8 groups as for 2, cold and warm; ``?group=`` with a withheld name answers as one no tool
    has."""
    # given / when
    _grouped_tools(rows, 2)
    few, few_sql = read(operator, "/api/v1/tools/?page_size=500", tenant)
    _grouped_tools(rows, 8)
    more, more_sql = read(operator, "/api/v1/tools/?page_size=500", tenant)
    withheld, _ = read(operator, "/api/v1/tools/?group=zz_grouped_001_group", tenant)
    unknown, _ = read(operator, "/api/v1/tools/?group=zz_no_such_group", tenant)
    visible, _ = read(operator, "/api/v1/tools/?group=zz_grouped_000_group", tenant)
    # then
    groups = {tool["name"]: tool["group"] for tool in more["results"] if tool["name"].startswith("zz_grouped_")}
    assert len(groups) == 8
    assert groups["zz_grouped_000"] == "zz_grouped_000_group"
    assert groups["zz_grouped_001"] == withheld_label(ToolGroup)
    for cache in ("cold", "warm"):
        assert len(more_sql[cache]) == len(few_sql[cache]), "\n".join(more_sql[cache])
    assert withheld == unknown and withheld["results"] == []
    assert [tool["name"] for tool in visible["results"]] == ["zz_grouped_000"]
