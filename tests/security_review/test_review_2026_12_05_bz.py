"""Review of 2026-12-05 (bz): the tool function itself as the misbehaving party (a developer's buggy or careless tool).

Each test fails on the reviewed code (main at 1a7a2e2) and states what was found ("Found: ...") and what is
expected ("Expect: ...").

Findings: a tool that called ``sys.exit()`` (a command-line library's ``main``) or raised ``GeneratorExit`` escaped
``toolhub.outcomes.run_outcome`` (it caught ``Exception`` only): the request raised, the call stayed ``running``
with nothing recorded (its outcome lost until the lease's end); on a real prefork worker ``SystemExit`` ended the
pool process (``WorkerLostError``), the call ``running``. What a tool raised or returned failing again when read
left the call ``running`` with its outcome lost too: a ``ToolError`` subclass whose ``__str__`` raises, a
``ToolResult.error`` value whose ``__str__`` raises (both escaped ``run_outcome``), a hand-built artifact
``ToolResult`` with no name (the artifact row's insert failed in the outcome's write). A result dict whose keys
collide once written as JSON text (``200`` and ``"200"``, ``True`` and ``"true"``) succeeded with all but the last
value silently dropped.

Checked and found holding (no test here), in process on SQLite: a custom exception whose ``__str__`` and
``__repr__`` raise (failed, the internal-error message; the detail reads ``<exception str() failed>``); a
``KeyboardInterrupt`` escapes on purpose (the process is being stopped; the lease and the reconciler settle the
call); results that are sets (a list), ``datetime``/``Decimal`` (strings, ``Decimal('NaN')`` as ``"NaN"``), a
generator (read within the limit), a dict with distinct int/tuple/None keys (string keys) succeed; ``bytes``, NaN and
infinity floats, a plain ``object()`` fail with "cannot be serialized to JSON"; a cyclic dict fails
(``RecursionError``, the internal-error message); a tool mutating a nested argument (an ``Any`` parameter, atomic
or not) leaves the stored arguments and the audit trail as requested; ``MAX_RESULT_BYTES`` is measured on UTF-8
JSON with ``ensure_ascii=False`` after scrubbing, so 4-byte characters just under and over the limit are counted
exactly; Celery soft and hard time limits are set per task (``toolhub.tasks.OwnTimeLimits``).
"""

import sys
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.helpers import RequestCall
from tests.integration.workers import Worker, wait_for
from toolhub import Tool, registry
from toolhub.authorization import CallPrincipal
from toolhub.exceptions import ToolError
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.tools.context import ToolContext
from toolhub.tools.results import ToolResult

pytestmark = pytest.mark.django_db


def _cli_report() -> str:
    """Run a report through a command-line library's entry point, which ends with ``sys.exit``."""
    sys.exit(2)


def _stray_generator_exit() -> str:
    """Close a generator by hand and re-raise what it raised (a careless tool)."""
    raise GeneratorExit


@pytest.mark.parametrize(
    ("handler", "exc_name"), [(_cli_report, "SystemExit"), (_stray_generator_exit, "GeneratorExit")]
)
def test_a_tool_that_calls_sys_exit_fails_its_call_instead_of_escaping_the_pipeline(
    request_call: RequestCall, alice: User, handler: Any, exc_name: str
) -> None:
    """alice's model calls a tool whose code ends with ``sys.exit(2)`` (or raises ``GeneratorExit``).

    Found: ``run_outcome`` caught ``Exception`` only; ``SystemExit`` and ``GeneratorExit`` are ``BaseException``s,
    so they escaped the pipeline: the request raised, the call stayed ``running`` with no outcome (lost until its
    lease ran out), and on a Celery prefork worker ``SystemExit`` ends the worker's child process.
    Expect: the call fails like any other tool failure: the sanitized internal-error message naming the
    exception's type for the model, the traceback in ``error_detail`` for the operators.
    """
    tool = Tool.from_function(handler, name="review_bz_exit", risk="low")
    with registry.temporarily(tool):
        call = request_call("review_bz_exit", {}, alice, tenant="acme")

    assert call.status == CallStatus.FAILED
    assert f"internal error ({exc_name})" in call.error
    assert exc_name in call.error_detail


class _Unprintable:
    """A value whose text form cannot be made (a lazy proxy whose backend is gone)."""

    def __str__(self) -> str:
        raise RuntimeError("the proxy's backend is closed")


class _QuotaError(ToolError):
    """A developer's ``ToolError`` whose message is built from a closed client."""

    def __str__(self) -> str:
        raise RuntimeError("the client is closed")


def _raises_unprintable_tool_error() -> str:
    """Fail with a ToolError that cannot be read."""
    raise _QuotaError("quota")


def _returns_unprintable_error() -> ToolResult:
    """Fail with a ToolResult.error whose value cannot be read."""
    return ToolResult.error(_Unprintable())  # type: ignore[arg-type]


def _returns_nameless_artifact() -> ToolResult:
    """Return an artifact built by hand, without a name."""
    return ToolResult(kind="artifact", value=b"report", name=None, media_type="text/plain")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "handler", [_raises_unprintable_tool_error, _returns_unprintable_error, _returns_nameless_artifact]
)
def test_what_a_tool_hands_back_failing_when_read_fails_the_call_instead_of_leaving_it_running(
    request_call: RequestCall, alice: User, handler: Any
) -> None:
    """alice's model calls a tool that raises or returns something that fails again when toolhub reads it.

    Found: ``run_outcome`` read the tool's exception (``str()`` of a ``ToolError``, in ``default_error_handler``) and
    its ``ToolResult.error`` value outside any guard, and stored a hand-built artifact's ``None`` name as it was:
    the ``RuntimeError`` escaped (an on-commit callback in process, the task on a worker) or the artifact's insert
    failed in the outcome's write; either way the call stayed ``running`` with its outcome lost, though the tool
    had run.
    Expect: the call fails with a message for the model (nothing of the unreadable value), the detail for the
    operators, and no artifact row.
    """
    tool = Tool.from_function(handler, name="review_bz_unreadable", risk="low")
    with registry.temporarily(tool):
        call = request_call("review_bz_unreadable", {}, alice, tenant="acme")

    assert call.status == CallStatus.FAILED, call.status
    assert call.error
    assert not call.artifacts.exists()
    assert ToolCall.objects.filter(status=CallStatus.RUNNING).count() == 0


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_tool_that_calls_sys_exit_on_a_worker_fails_its_call_and_the_worker_goes_on(alice: User) -> None:
    """On a real Celery worker (PostgreSQL, Redis), alice's call runs ``tests.testapp.tools.exits_like_a_cli``.

    Found: ``SystemExit`` escaped ``run_outcome`` and the task: the worker's child process ended with the call
    ``running``, its outcome lost until the lease ran out.
    Expect: the call fails within seconds with the internal-error message, and the workers run the next call.
    """
    principal = CallPrincipal(user_id=alice.pk, username=alice.get_username(), tenant="acme")

    def request(tool_name: str) -> ToolCall:
        return tool_call_request(
            request=CallRequest(tool_name=tool_name, arguments={}, principal=principal, context=ToolContext())
        )

    worker = Worker("review-bz", concurrency=1).start()  # its own, with one pool process: the next call needs it
    try:
        call = request("exits_like_a_cli")
        failed = wait_for(
            lambda: (c := ToolCall.objects.get(pk=call.pk)).status == CallStatus.FAILED and c, timeout=20, what="failed"
        )
        assert "internal error (SystemExit)" in failed.error
        # (run by this worker, or by the suite's integration worker when one listens on the same queue)
        assert failed.worker
        after = request("crashes")
        wait_for(lambda: ToolCall.objects.get(pk=after.pk).status == CallStatus.FAILED, timeout=20, what="next call")
    finally:
        worker.stop()


def _counts_by_code() -> dict[Any, Any]:
    """Count orders by status code, as a careless tool does: ints from one source, strings from another."""
    return {"summary": {200: "12 orders", "200": "3 orders", True: "on", "true": "off"}}


def test_a_result_whose_keys_collide_as_json_text_fails_instead_of_silently_dropping_values(
    request_call: RequestCall, alice: User
) -> None:
    """alice's model calls a tool returning ``{200: ..., "200": ...}`` (and ``True`` beside ``"true"``).

    Found: ``toolhub.tools.results.to_json_value`` (pydantic's ``to_jsonable_python``) wrote both keys as ``"200"``
    and kept the last value: the call succeeded with ``{"200": "3 orders", "true": "off"}``, the other values gone
    without a word to the model, the operator or the audit trail.
    Expect: the call fails with the message every unserializable result gets, the collision named in the detail.
    """
    tool = Tool.from_function(_counts_by_code, name="review_bz_counts", risk="low", allow_any=True)
    with registry.temporarily(tool):
        call = request_call("review_bz_counts", {}, alice, tenant="acme")

    assert call.status == CallStatus.FAILED, call.result
    assert call.error == "The tool returned a value that cannot be serialized to JSON."
    assert "collide" in call.error_detail
