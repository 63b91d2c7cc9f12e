"""Review of 2026-12-05 (g): framework adapters, inner-call budget charge, secret scrubbing (1949810..d2b620b).

Each test fails on the reviewed code (main at d2b620b) and states what was found and what is expected.

Checked and found holding (no test here): ``pause_decision`` never maps ``pending_approval`` or a call that
never ran to approve (every way out of ``pending_approval`` into ``RELEASED_STATUSES`` is ``tool_call_release``,
called by the approvals app only; ``failed`` is reached only from ``running``); the budget charge
(``_ChargedToRun._refuse_beyond_calls``: ``turns + max(inner rows, charged) + asked + below <= limit`` in one
conditional UPDATE; a stale read only refuses more, never less; a run without a given ``max_tool_calls`` pays no
extra query; a charged inner call that did not run stays charged, as the README says "whichever is more");
``spending_below`` counts a finished child's charged-but-unrun inner calls against its parent likewise; the
examples ``examples/langgraph/approve_an_order.py`` and ``examples/openai_agents/run.py`` run offline to the end
(``examples/pydantic_ai/order_approval.py`` needs the demo database and is unchanged in this range).
"""

import logging
import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from langchain_core.messages import AIMessage

from approvals.models import ApprovalRequest
from tests.security_review.conftest import client_for
from tests.security_review.test_probe_2026_12_05_c import _asks, _ChatModel, _graph, _start
from tests.testapp.models import SideEffect
from toolhub.adapters.langgraph import LangGraphToolhub
from toolhub.models import ToolCall
from toolhub.tools.secrets import SecretScrubber

pytestmark = pytest.mark.django_db(transaction=True)


# --- cf5aa2f: the agent's tools are the hub's, not the agent's ------------------------------------------------------


def test_langgraph_hub_shared_by_two_agents_gates_and_files_a_tool_the_first_agent_was_not_given(
    alice: User, operator: User
) -> None:
    """Found: ``toolhub/adapters/langgraph.py`` keeps the tools ``tools(names)`` handed out in one set per hub
    (``LangGraphToolhub._handed``, ``self._handed.update(...)``), and ``_needs_review``/``request_approvals`` ask
    that set. A hub (one per user, as the README builds it) that hands ``record_effect`` to one agent and
    ``risky_effect`` to another gates and files ``risky_effect`` for the first agent too: its model asks for it,
    the HITL middleware pauses it, ``request_approvals`` files it in alice's name, and the operator's approval runs
    it (a ``SideEffect``), though that agent never had the tool: probe c #5 again, one hub further.
    Expect: the README's rule ("the tools ``hub.tools(names)`` hands out are the agent's") holds per agent: the
    middleware built for an agent pauses, and ``request_approvals`` files, only that agent's tools (e.g. the
    middleware records the tools it gates against, or ``tools()`` returns a bound gate); nothing is filed or run.
    """
    hub = LangGraphToolhub(user=alice, wait_seconds=5)
    hub.tools(["risky_effect"])  # a second agent of the same user, given risky_effect
    model = _ChatModel(messages=iter([_asks("risky_effect", {"note": "wire 900"}), AIMessage("ok")]))
    agent, config = _graph(hub, model, ["record_effect"], None), {"configurable": {"thread_id": "t-shared"}}

    paused = _start(agent, config)
    try:
        hub.request_approvals(paused.interrupts, config)
    except Exception:  # noqa: BLE001 - a refusal is the expected outcome
        pass
    for request in ApprovalRequest.objects.all():
        client_for(operator).post(f"/api/v1/approvals/{request.pk}/approve/", {}, format="json")

    assert not ToolCall.objects.filter(tool_name="risky_effect").exists(), "filed for an agent without the tool"
    assert not SideEffect.objects.exists(), "a tool this agent was never given ran on the operator's approval"


# --- 13781e6: a foreign thread's record "that shows no secret" keeps its exception ---------------------------------

SECRET = "sk-live-review-g-0123456789"


def test_a_tools_executor_thread_logs_an_exception_whose_frame_holds_the_secret_with_exc_info_kept() -> None:
    """Found: ``toolhub/tools/secrets.py`` ``SecretScrubber.log_record(only_when_found=True)`` (a thread without
    a call's context: the tool's ``ThreadPoolExecutor``) leaves a record whole when its message and formatted
    traceback show no secret, ``exc_info`` included. The exception's frames keep their local variables, so a tool
    whose executor thread does ``token = secret; ... raise ConnectionError("refused")`` and logs it hands every
    handler reading ``exc_info`` (error trackers capture frame locals) the secret in clear. ``log_record`` itself
    says why it drops ``exc_info``: "The exception object (and its frames' local variables) would reach handlers
    that read exc_info"; the README promises that such a thread "is scrubbed of every running call's secrets".
    Expect: a record whose exception's frames hold a running call's secret (in a local, as a value or in a
    container) loses ``exc_info`` as a call's own record does; only a record holding none anywhere is left whole.
    """
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    log = logging.getLogger("review_g.executor")
    handler = Keep()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    entered, done = threading.Event(), threading.Event()

    def call_holding_the_secret() -> None:
        with SecretScrubber([SECRET]).scope():
            entered.set()
            done.wait(5)

    def executor_work() -> None:  # the tool's own code, run on an executor thread without its context
        try:
            headers = {"Authorization": f"Bearer {SECRET}"}  # noqa: F841 - a frame local, as in a real client
            raise ConnectionError("connection refused")
        except ConnectionError:
            log.exception("upstream call failed")

    runner = threading.Thread(target=call_holding_the_secret)
    runner.start()
    try:
        assert entered.wait(5)
        worker = threading.Thread(target=executor_work)
        worker.start()
        worker.join(5)
    finally:
        done.set()
        runner.join(5)
        log.removeHandler(handler)

    (record,) = records
    leaked: list[Any] = []
    if record.exc_info and record.exc_info[2] is not None:
        tb = record.exc_info[2]
        while tb is not None:
            leaked += [value for value in tb.tb_frame.f_locals.values() if SECRET in repr(value)]
            tb = tb.tb_next
    assert not leaked, f"handlers reading exc_info get the secret from the frame's locals: {leaked!r}"
