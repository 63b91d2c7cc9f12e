"""Probe of 2026-12-04 (m): what tenant staff configure or send, and resource limits.

Each test fails on the code as probed; its docstring says what was found and what is expected.
"""

import json
import time
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agents_app.services import run_start
from tests.security_review.conftest import client_for
from tests.tenancy.conftest import make_user
from toolhub import registry, tool
from toolhub.models import Grant, Tenant

pytestmark = pytest.mark.django_db


# --- an unauthenticated request body that hangs a web worker ---------------------------------------------


def test_the_json_body_check_is_quadratic_in_an_unterminated_string_of_escaped_quotes(db: None) -> None:
    """Found: ``JSONBodyCheckMiddleware`` runs on every request with ``Content-Type: application/json``,
    before authentication and CSRF, and measures the nesting depth *before* decoding the JSON with
    ``_STRING.sub("", text)`` (toolhub/api/parsers.py), ``_STRING = r'"[^"\\\\]*(?:\\\\.[^"\\\\]*)*"'``. On a
    body that is one ``"`` followed by ``\\"`` repeated (never closed), the regex starts again at every escaped
    quote and scans to the end each time: O(n^2). 40 KB take about 10 s of one worker's CPU here, 80 KB about
    36 s, and the 2.5 MB Django accepts about ten hours; anyone on the network can do it, no account needed.
    Expect: a body that is not JSON is refused (400 or 401/403) in time linear in its size: well under a second.
    """
    body = '"' + '\\"' * 20_000  # 40 KB, not even valid JSON
    started = time.monotonic()
    response = Client().post("/api/v1/calls/", data=body, content_type="application/json")
    elapsed = time.monotonic() - started
    assert response.status_code in (400, 401, 403)
    assert elapsed < 1.0, f"one 40 KB anonymous request held the worker for {elapsed:.1f} s"


# --- a developer's scripted agent multiplies a tool result ------------------------------------------------

#: A tool of the tenant's whose result is a few kilobytes (a search hit, a file read, a remote answer).
REPORT = "r" * 5_000


@tool
def probe_m_report() -> str:
    """Return this month's report."""
    return REPORT


@pytest.fixture
def _report_tool(tenant: Tenant) -> Iterator[None]:
    with registry.temporarily(probe_m_report):
        Grant.objects.create(tool_name="probe_m_report", tenant=tenant)
        yield


def test_a_scripted_turn_multiplies_the_last_tool_result_without_bound(
    _report_tool: None, tenant: Tenant, roles: dict[str, Group], django_capture_on_commit_callbacks: object
) -> None:
    """Found: a tenant's developer creates agents (``POST /api/v1/agents/``) on the ``scripted`` provider, which
    always exists, with a script of their choosing, bounded only by the request size. The scripted model
    replaces *every* ``{last_tool_result}`` in a turn's content with the newest tool result
    (agents_app/models_adapters/scripted.py ``str.replace``), so a 36 KB script turns one 5 KB result into a
    10 MB assistant message, built in the worker's memory and stored in the run's messages; a 2 MB script
    and a 1 MB result (a file read, a remote MCP answer) make hundreds of gigabytes. Nothing bounds a turn's
    text (a real endpoint is bounded by max_tokens).
    Expect: the run stores no model turn larger than 1 MB (the platform's own bound on data from outside,
    MAX_EXTERNAL_RESULT_BYTES): the substitution is bounded, or the turn fails.
    """
    developer = make_user("acme-developer", tenant=tenant, staff=True, groups=(roles["developers"],))
    script = [
        {"tool_calls": [{"name": "probe_m_report", "arguments": {}}]},
        {"content": "{last_tool_result}" * 2_000},
    ]
    response = client_for(developer).post(
        "/api/v1/agents/",
        {
            "name": "amplifier",
            "tenant": "acme",
            "model": {"provider": "scripted", "script": script},
            "tools": ["probe_m_report"],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    agent_id = response.json()["id"]
    assert len(json.dumps(script)) < 40_000

    from agents_app.models import Agent

    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(agent=Agent.objects.get(pk=agent_id), user=developer, input="report please")
    run.refresh_from_db()
    largest = max(len(json.dumps(message)) for message in run.messages)
    assert largest <= 1_000_000, f"one model turn of the run stores {largest:,} bytes from a 36 KB script"


# --- a developer's approval rule that cannot be decided crashes the call instead of holding it ----------


@tool
def probe_m_tag(labels: dict[str, str]) -> str:
    """Label a customer record."""
    return "labelled"


def test_a_tenant_rule_contains_a_list_on_an_object_argument_crashes_instead_of_holding(
    alice: User, tenant: Tenant, roles: dict[str, Group]
) -> None:
    """Found: a tenant's developer adds, in the admin, an approval rule bound to their tenant: ``labels contains
    ["vip"]`` (the form accepts any JSON value for any operator). For a call whose ``labels`` is an object,
    ``_compare`` evaluates ``["vip"] in {...}`` (approvals/rules.py, Operator.CONTAINS) and raises
    ``TypeError: unhashable type: 'list'``, which nothing catches: ``POST /api/v1/calls/`` answers 500, and
    in a run ``advance_run_task`` raises on every wake-up while the run stays ``running`` (the sweeper wakes
    it again and again). The comparisons beside it hold a call they cannot decide ("hold the call rather
    than let it pass"); ``contains`` escapes that.
    Expect: a rule that cannot be decided on the call's arguments holds the call for a person (or the rule
    is refused when saved): never a server error.
    """
    developer = make_user("acme-developer", tenant=tenant, staff=True, groups=(roles["developers"],))
    admin = Client()
    admin.force_login(developer)
    with registry.temporarily(probe_m_tag):
        Grant.objects.create(tool_name="probe_m_tag", tenant=tenant)
        saved = admin.post(
            "/admin/approvals/approvalrule/add/",
            {
                "name": "vip labels need a look",
                "enabled": "on",
                "priority": "10",
                "tool_name": "probe_m_tag",
                "tenant": tenant.pk,
                "argument": "labels",
                "operator": "contains",
                "value": '["vip"]',
                "required_approvals": "1",
            },
        )
        if saved.status_code != 302:
            return  # refused when saved: secure
        api = client_for(alice)
        api.raise_request_exception = False
        response = api.post(
            "/api/v1/calls/", {"tool": "probe_m_tag", "arguments": {"labels": {"tier": "gold"}}}, format="json"
        )
        assert response.status_code != 500, "a tenant's own approval rule turns its calls into server errors"
        assert response.json()["status"] == "pending_approval"


# --- PII redaction of results: quadratic on text from outside --------------------------------------------


def test_pii_redaction_email_pattern_is_quadratic_on_a_long_result() -> None:
    """Found: ``PIIRedaction`` (toolhub/interceptors.py, the documented result interceptor) runs
    ``_EMAIL = [A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}`` with ``re.sub`` over every
    string of a result. The unanchored local part restarts at every character and scans to the end of a run
    of word characters and dots: O(n^2). A 60 KB string ``a@a.a.a....`` takes about 10 s here; a 1 MB result
    (a remote MCP answer, a workspace file, MAX_EXTERNAL_RESULT_BYTES and BUILTIN_FILE_MAX_BYTES allow it)
    holds the worker for the tool's whole time limit, and the call fails.
    Expect: redacting a 60 KB result takes well under a second (linear work per character).
    """
    from toolhub.interceptors import PIIRedaction

    text = "a@" + "a." * 30_000
    started = time.monotonic()
    PIIRedaction(kinds=("email",)).redact_text(text)
    elapsed = time.monotonic() - started
    assert elapsed < 1.0, f"redacting one 60 KB string took {elapsed:.1f} s"


# --- the export is a GET that writes to the audit trail --------------------------------------------------


def test_the_call_export_writes_an_audit_event_on_a_cross_site_get(tenant: Tenant, roles: dict[str, Group]) -> None:
    """Found: ``/admin/toolhub/toolcall/export/csv/`` (toolhub/admin_audit.py ``export_view``) answers GET and
    appends a ``calls.exported`` event to the tamper-evident trail in the viewer's name, with every query
    value they sent (``query``). Django's CSRF check does not cover GET, and the session cookie is
    SameSite=Lax, which is sent on a top-level navigation from any site: a page the auditor visits can
    write permanent audit events attributed to them, with filters and search terms of its choosing
    (and start a download of their tenant's calls). "Verify now", the saga retry and the decisions are POST.
    Expect: the export that records an audit event is a POST with a CSRF token; a GET records nothing.
    """
    from toolhub.models import AuditEvent

    auditor = make_user("acme-auditor", tenant=tenant, staff=True, groups=(roles["auditors"],))
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(auditor)
    before = AuditEvent.objects.filter(event_type="calls.exported").count()
    response = browser.get(
        "/admin/toolhub/toolcall/export/csv/?q=auditor+exported+everything+for+evil.example",
        HTTP_SEC_FETCH_SITE="cross-site",
        HTTP_REFERER="https://evil.example/",
    )
    if hasattr(response, "streaming_content"):
        b"".join(response.streaming_content)
    after = AuditEvent.objects.filter(event_type="calls.exported").count()
    assert after == before, f"a cross-site GET ({response.status_code}) wrote {after - before} audit event(s)"
