"""Plain helpers shared by every test suite."""

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from toolhub.audit_verify import verify_audit_chains
from toolhub.authorization import CallPrincipal
from toolhub.models import AuditEvent, ToolCall

#: ``request_call(tool_name, arguments, user=None, run_id=None, *, tenant=..., ...)`` (tests/conftest.py).
RequestCall = Callable[..., ToolCall]


def console(user: User) -> Client:
    """A browser session of the admin console, logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def shown_key(response: Any) -> str:
    """The API key the admin's "add token" answer shows once (the table holds only its digest)."""
    found = re.search(r'<code id="token-key">([^<]+)</code>', response.content.decode())
    assert found is not None, "no key on the page"
    return found.group(1)


def confirmation_fields(html: str) -> dict[str, Any]:
    """The hidden fields of an action's confirmation page (``CommentActionMixin``), as a browser posts them.

    Add the form's own fields (a note, a comment) and post them to the list to confirm.
    """
    form = re.search(r'<form[^>]*id="action-with-comment-form"[^>]*>(.*?)</form>', html, re.S)
    assert form, f"no confirmation page: {html[:500]}"
    posted: dict[str, list[str]] = {}
    for name, value in re.findall(r'<input type="hidden" name="(?!csrf)(\w+)" value="([^"]*)"', form.group(1)):
        posted.setdefault(name, []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in posted.items()}


def action_confirmation(client: Client, changelist: str, action: str, selected: Sequence[Any]) -> dict[str, Any]:
    """Choose ``action`` for ``selected`` on the list: what confirming its page posts (``confirmation_fields``)."""
    page = client.post(changelist, {"action": action, "_selected_action": [str(pk) for pk in selected]})
    return confirmation_fields(page.content.decode())


def event_types(call: ToolCall) -> list[str]:
    """The call's audit event types, in the order they were appended."""
    return list(AuditEvent.objects.filter(call_id=call.id).order_by("seq").values_list("event_type", flat=True))


def audit_text(call: ToolCall) -> str:
    """Everything the audit trail holds about a call, as one string (to look for leaks)."""
    return " ".join(AuditEvent.objects.filter(call_id=call.id).values_list("data", flat=True))


def assert_audit_intact() -> int:
    """Verify every chain; return how many events were checked."""
    checked, problems = verify_audit_chains()
    assert problems == []
    return checked


def principal_for(
    user: User | None = None,
    *,
    tenant: str = "",
    agent_name: str = "",
    agent_tools: frozenset[str] | None = None,
) -> CallPrincipal:
    return CallPrincipal(
        user_id=user.pk if user else None,
        username=user.get_username() if user else "",
        tenant=tenant,
        agent_name=agent_name,
        agent_tools=agent_tools,
    )


@contextmanager
def for_a_worker() -> Iterator[None]:
    """Calls requested inside are queued for a worker instead of run by this process when it commits.

    In eager mode the requesting process writes a call already claimed and runs it itself; tests of what
    a worker does to a queued call (claim it, check it again) request it here, hold the commit's
    dispatch, change something, then let the dispatch deliver it.
    """
    from toolhub.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = False
    try:
        yield
    finally:
        app.conf.task_always_eager = eager
