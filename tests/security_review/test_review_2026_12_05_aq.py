"""Review of 2026-12-05 (aq): regressions and holes in the newest commits (a0c4d88..a48e13e).

The worker path, the agent loop and its model answers, model providers, the webhook opener, MCP header schemas,
storable integers and the tool definition rules, read for a new hole, a broken documented behaviour or a hot-path
cost. Each test fails on the reviewed code (main at a48e13e); its docstring says "Found: ..." and "Expect: ...".

Findings:

1. ``TOOLHUB["CALL_MAX_ATTEMPTS"]`` (d2b84a6) bounded a lost call's *claims*, not its lost attempts: a
   compensation's call is one row over all its ``SAGA_MAX_ATTEMPTS`` attempts, so a compensation refused twice by
   its downstream (ordinary failures, retried with backoff) whose worker was then restarted once was no longer run
   again although its tool is idempotent: it needed attention, the compensation went ``unknown`` and the saga
   waited for an operator; after an operator's retry (a fresh round) the first lost worker did the same. Fixed:
   the reconciler counts the call's attempts lost in a row (its own requeues since the call was last queued by a
   decision, read from the call's audit events; a batch's hand-back neither counts nor ends the row), as
   ``RUN_MAX_LOST_STEPS`` does for a run's steps (``toolhub.sweeper._lost_in_a_row``).
2. The generator rule (40c58cd) refused generator *functions* because their body ran while the result was
   serialized, after the time limit was lifted; a plain function returning a lazy iterator (a generator
   expression, ``map``, a generator function behind a ``functools.wraps`` decorator) passed it, and its work still
   ran in ``outcomes._result_value`` (pydantic reads any iterator as a list): ``timeout=0.2`` with 0.6 s of rows
   succeeded. Fixed: ``Tool.invoke`` reads a returned iterator within the tool's limit
   (``toolhub.tools.results.read_now``), for sync and async tools alike.

Checked and found holding (no test here): ``ModelTurn``/``ModelToolCall`` validation accepts every answer the
adapters build from a legitimate provider: ``content: null`` (as ``""``), usage missing, ``null`` or given as floats
(``int()`` in both the plain and the streamed path), a tool call without an id (``call_<index>``), streamed deltas
without an index; the scripted model's turns, agentic inner models (``_ChargedToRun`` through ``adapter_for``) and
the adapters under ``toolhub/adapters`` (which build no ``ModelTurn``) are unaffected; a streamed answer of the
wrong shape fails the turn through ``model_answer``'s catch-all, never leaving the run leased. ``tokens_added_sql``
never computes past the column. ``provider_client``: the streaming, deadline and redirect tests pass against the
fake endpoint; a configured ``base_url`` (Azure's or any OpenAI-compatible one) is used as given, only an empty one
defaults to OpenAI's. The lost-step count (``_step_lost``) is rolled back with a ``NO_TIME`` step, reset by an
answer and by an in-process step; the transcript's turn counter matches ``run.turn`` (only ``_record_turn`` appends
assistant messages). ``OwnTimeLimits``: Celery's worker strategy passes ``None`` limits to the pool, which then
applies the task's own (read once at worker start, as ``_ToolCallTask`` documents); ``running_after_task`` reads the
same value. The claim hint's checks cost two ``storable_text`` calls of short strings per delivery. The webhook's
opener is built once; ``http.client`` errors are caught and the URL's secret parts scrubbed. Sensitive defaults:
``0``/``False`` defaults of a sensitive parameter are refused too (they would be published).

Found, not fixed: the storable-integer bound (963eb45) adds about a quarter to ``json_storage_problem``'s walk of
an integer-heavy result (~0.16 µs per integer: 98 → 122 ms for 150,000 integers), small beside the rest of a
call's storage; a lazy iterator nested in a result (``{"rows": (… for …)}``) is still read at serialization; an
endpoint's usage of ``Infinity`` reaches ``_turn_from`` as an ``OverflowError`` it does not catch, so the run is told
"Model adapter error (OverflowError)" and the log gets an adapter-bug traceback instead of "not a chat completion";
each MCP request reads the governance stamp once more for the header schemas (``header_schemas_for``), even when no
tool declares a header.
"""

import functools
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Annotated, Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.sagas.sample_tools import LOG, RELEASE_FAILS, TOOLS
from toolhub import Param, sweeper, tool
from toolhub.authorization import CallPrincipal
from toolhub.claims import tool_call_claim
from toolhub.models import CallStatus, ToolCall
from toolhub.pipeline import CallRequest, tool_call_request
from toolhub.sagas import compensating
from toolhub.sagas.models import Compensation, CompensationStatus
from toolhub.sagas.recovery import sagas_sweep
from toolhub.sweeper import calls_reconcile_expired_leases
from toolhub.tools.context import ToolContext
from toolhub.tools.registry import registry

# --- 1. the reconciler's bound on lost attempts counted a compensation's ordinary failures -------------------


@pytest.fixture
def saga_tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 5, "SAGA_RETRY_BASE_SECONDS": 10.0}
    LOG.clear()
    RELEASE_FAILS["on"] = False
    with registry.temporarily(*TOOLS):
        yield
    RELEASE_FAILS["on"] = False


def _saga_call(user: User, name: str, arguments: dict[str, Any]) -> ToolCall:
    principal = CallPrincipal(user_id=user.pk, username=user.username, tenant="acme")
    return tool_call_request(
        request=CallRequest(
            tool_name=name, arguments=arguments, principal=principal, context=ToolContext(tenant="acme"), saga_id="s"
        )
    )


def _lose_its_worker(call: ToolCall, worker: str) -> None:
    """The call is claimed by ``worker``, which dies running it: its lease ends with no outcome."""
    claimed = tool_call_claim(call_id=call.pk, worker=worker)
    assert claimed is not None and claimed.status == CallStatus.RUNNING
    ToolCall.objects.filter(pk=call.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def _retry_due(compensation: Compensation) -> None:
    Compensation.objects.filter(pk=compensation.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert sagas_sweep()["retried"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_compensation_that_failed_twice_is_run_again_when_its_worker_is_lost_once(
    saga_tools: None, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: the reconciler queues a lost call of an idempotent tool again only while ``call.attempts`` is below
    ``CALL_MAX_ATTEMPTS`` (3), and ``attempts`` counts every claim: a compensation's call is the same row on each of
    its ``SAGA_MAX_ATTEMPTS`` attempts, so one whose downstream refused it twice (ordinary failures, retried with
    backoff) and whose worker was then restarted once (a deploy) was not run again: it needed attention, the
    compensation became ``unknown`` and the saga waited for an operator, although its tool is idempotent and no
    worker had died on it before. Every operator retry of a compensation (a fresh round) hit the same wall.
    Expect: the bound counts lost attempts in a row (the reconciler's own requeues since anyone else queued the
    call), as ``RUN_MAX_LOST_STEPS`` does for a run's steps: this call is queued again and then succeeds.
    """
    monkeypatch.setattr(sweeper, "dispatch_call", lambda call: None)
    _saga_call(alice, "reserve", {"item": "x"})
    RELEASE_FAILS["on"] = True
    _saga_call(alice, "explode", {"reason": "boom"})
    (compensation,) = Compensation.objects.filter(saga__key="s")
    _retry_due(compensation)  # attempt 2: refused again
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.RETRY_SCHEDULED and compensation.attempts == 2

    RELEASE_FAILS["on"] = False
    with monkeypatch.context() as held:  # attempt 3 is queued for a worker, which dies running it
        held.setattr(compensating, "dispatch_call", lambda call: None)
        _retry_due(compensation)
    call = ToolCall.objects.get(pk=compensation.call_id)
    assert call.status == CallStatus.QUEUED
    _lose_its_worker(call, "w3")

    counts = calls_reconcile_expired_leases()

    row = ToolCall.objects.get(pk=call.pk)
    assert (row.status, counts) == (CallStatus.QUEUED, {"requeued": 1, "needs_attention": 0}), (row.status, row.error)
    compensation.refresh_from_db()
    assert compensation.status == CompensationStatus.RUNNING


# --- 2. a tool that returns a lazy iterator ran its work past its time limit ---------------------------------


def _logged(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator as apps write them (logging, metrics): it passes the function's result through."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


@tool(risk="low", timeout=0.2)
def aq_slow_rows(n: Annotated[int, Param("How many rows.")]) -> Any:
    """Rows, each looked up slowly: returned as a generator expression."""
    return ({"row": i, "slept": time.sleep(0.3)} for i in range(n))


@tool(risk="low", timeout=0.2)
def aq_mapped_rows(n: Annotated[int, Param("How many rows.")]) -> Any:
    """Rows, each looked up slowly: returned as a ``map``."""
    return map(lambda i: {"row": i, "slept": time.sleep(0.3)}, range(n))


@tool(risk="low", timeout=0.2)
@_logged
def aq_yielded_rows(n: Annotated[int, Param("How many rows.")]) -> Any:
    """Rows, yielded by a generator function behind a decorator."""
    for i in range(n):
        time.sleep(0.3)
        yield {"row": i}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", ["aq_slow_rows", "aq_mapped_rows", "aq_yielded_rows"])
def test_a_tool_returning_a_lazy_iterator_is_held_to_its_time_limit(alice: User, name: str) -> None:
    """Found: ``toolhub.tools.definition_rules`` refuses a generator *function*, because its body would run when the
    result is serialized, after ``call_with_timeout`` returned; but a plain function returning a lazy iterator (a
    generator expression, ``map``, or a generator function behind a ``functools.wraps`` decorator, which
    ``inspect.isgeneratorfunction`` does not see through) is accepted, and its work still runs in
    ``outcomes._result_value`` (pydantic serializes any iterator as a list), outside the limit: a tool with
    ``timeout=0.2`` whose rows take 0.3 s each succeeded after 0.6 s (an endless one would hold the worker until
    Celery's limit).
    Expect: an iterator a tool returns is read within its time limit (``Tool.invoke``): the call fails with the
    tool's timeout error, as it would had the work been in the function's body.
    """
    with registry.temporarily(aq_slow_rows, aq_mapped_rows, aq_yielded_rows):
        started = time.monotonic()
        call = tool_call_request(
            request=CallRequest(
                tool_name=name,
                arguments={"n": 2},
                principal=CallPrincipal(user_id=alice.pk, username=alice.username, tenant="acme"),
                context=ToolContext(tenant="acme"),
            )
        )
        elapsed = time.monotonic() - started
    row = ToolCall.objects.get(pk=call.pk)
    assert row.status == CallStatus.FAILED, (row.status, row.result, elapsed)
    assert "time limit" in row.error or "timed out" in row.error, row.error
