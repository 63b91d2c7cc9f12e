"""Tools used by the integration and fault-injection tests."""

import enum
import sys
import time
from typing import Annotated

from django.db import DatabaseError
from pydantic import BaseModel

from agents_app.subagents import Subagent
from tests.testapp.models import SideEffect
from toolhub import Param, Progress, Risk, ToolContext, ToolError, ToolSuspend, tool
from toolhub.agentic import SimpleAgenticTool, StateMachineTool, Transition


@tool(risk=Risk.LOW)
def record_effect(note: Annotated[str, Param("Free text stored with the effect.")], ctx: ToolContext) -> dict:
    """Record one side effect (not idempotent): each execution adds exactly one row."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="record_effect", note=note)
    return {"effect_id": effect.pk}


@tool(risk=Risk.HIGH)
def risky_effect(note: Annotated[str, Param("Free text stored with the effect.")], ctx: ToolContext) -> dict:
    """Record one side effect; high risk, so it always waits for an operator."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="risky_effect", note=note)
    return {"effect_id": effect.pk}


@tool(risk=Risk.LOW)
def slow_effect(seconds: Annotated[float, Param("How long to work before recording.")], ctx: ToolContext) -> dict:
    """Sleep, then record one side effect (not idempotent): a window for killing the worker."""
    time.sleep(seconds)
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="slow_effect")
    return {"effect_id": effect.pk}


@tool(risk=Risk.LOW, idempotent=True)
def slow_idempotent(seconds: Annotated[float, Param("How long to work.")], ctx: ToolContext) -> dict:
    """Sleep, then record a side effect; idempotent, so it may be retried after a worker dies."""
    time.sleep(seconds)
    SideEffect.objects.get_or_create(call_id=ctx.idempotency_key or "", tool="slow_idempotent")
    return {"done": True}


@tool(risk=Risk.LOW)
def always_fails(reason: Annotated[str, Param("What to fail with.")]) -> str:
    """Fail with a tool error meant for the model."""
    raise ToolError(f"failed as asked: {reason}")


@tool(risk=Risk.LOW)
def crashes() -> str:
    """Fail with an unexpected exception whose details must not reach the model."""
    raise RuntimeError("secret internal detail: db password is hunter2")


@tool(risk=Risk.LOW)
def exits_like_a_cli() -> str:
    """Run a command-line entry point that ends with ``sys.exit`` (tests/security_review, review bz)."""
    sys.exit(2)


# --- Saga steps and their compensations (tests/integration/test_sagas.py) ---------------------------


@tool(risk=Risk.LOW)
def saga_step(label: Annotated[str, Param("Which step this is.")], ctx: ToolContext) -> dict:
    """Do one compensable step: record one side effect; the result names it in camelCase (``stepId``)."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="saga_step", note=label)
    return {"stepId": effect.pk, "label": label}


@saga_step.compensation(idempotent=True, risk=Risk.LOW)
def undo_saga_step(step_id: Annotated[int, Param("The step's id.")], label: str, ctx: ToolContext) -> dict:
    """Undo one step; once per idempotency key, however often it runs."""
    SideEffect.objects.get_or_create(call_id=ctx.idempotency_key or "", tool="undo_saga_step", defaults={"note": label})
    return {"undone": step_id}


@tool(risk=Risk.LOW)
def fragile_step(label: Annotated[str, Param("Which step this is.")], ctx: ToolContext) -> dict:
    """Do a step whose undoing fails until the downstream system is repaired."""
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="fragile_step", note=label)
    return {"label": label}


@fragile_step.compensation(idempotent=True, risk=Risk.LOW)
def undo_fragile_step(label: Annotated[str, Param("Which step to undo.")], ctx: ToolContext) -> dict:
    """Undo a fragile step; refused until a ``repair`` side effect with the same label exists."""
    if not SideEffect.objects.filter(tool="repair", note=label).exists():
        raise ToolError(f"the downstream system refused to undo {label}")
    SideEffect.objects.get_or_create(
        call_id=ctx.idempotency_key or "", tool="undo_fragile_step", defaults={"note": label}
    )
    return {"undone": label}


@tool(risk=Risk.LOW)
def slow_undo_step(
    label: Annotated[str, Param("Which step this is.")],
    seconds: Annotated[float, Param("How long undoing it takes.")],
    ctx: ToolContext,
) -> dict:
    """Do a step whose undoing is slow (a window for killing the worker)."""
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="slow_undo_step", note=label)
    return {"label": label, "seconds": seconds}


@slow_undo_step.compensation(idempotent=True, risk=Risk.LOW)
def undo_slow_step(label: str, seconds: float, ctx: ToolContext) -> dict:
    """Undo: take effect once per idempotency key, then work for ``seconds`` before answering."""
    SideEffect.objects.get_or_create(call_id=ctx.idempotency_key or "", tool="undo_slow_step", defaults={"note": label})
    time.sleep(seconds)
    return {"undone": label}


@tool(risk=Risk.LOW, timeout=1.0)
def overrunning_effect(seconds: Annotated[float, Param("How long to work.")], ctx: ToolContext) -> dict:
    """Work for ``seconds`` under a 1 s time limit; records a side effect only if it finishes in time."""
    time.sleep(seconds)
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="overrunning_effect")
    return {"done": True}


@tool(risk=Risk.LOW, timeout=30)
def stepped_work(
    steps: Annotated[int, Param("How many steps to work.")],
    seconds_per_step: Annotated[float, Param("How long each step takes.")],
    progress: Progress,
) -> str:
    """Work in steps, reporting progress after each (stored on the call, never shown to the model)."""
    for step in range(1, steps + 1):
        time.sleep(seconds_per_step)
        progress.update(f"step {step} of {steps}", current=step, total=steps)
    return f"worked {steps} steps"


@tool(risk=Risk.LOW, atomic=True, timeout=1.0)
def atomic_effect(
    note: Annotated[str, Param("Free text stored with the effect.")],
    ctx: ToolContext,
    fail_after_writing: Annotated[str, Param("Raise this message after writing (empty: succeed).")] = "",
    work_seconds: Annotated[float, Param("How long to work after writing (the limit is 1 s).")] = 0.0,
    suspend: Annotated[str, Param("After writing, suspend: 'storable' or 'unstorable' payload (empty: don't).")] = "",
) -> dict:
    """Record one side effect in toolhub's database, atomically with the call's outcome."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="atomic_effect", note=note)
    if work_seconds:
        time.sleep(work_seconds)
    if fail_after_writing:
        raise ToolError(fail_after_writing)
    if suspend:
        raise ToolSuspend("waiting for the outside", {"note": note} if suspend == "storable" else {"note": object()})
    return {"effect_id": effect.pk}


@tool(risk=Risk.LOW, atomic=True)
def atomic_swallowing_effect(ctx: ToolContext) -> str:
    """Write a row, then hit a database error and carry on as if nothing happened (its transaction is aborted)."""
    SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="atomic_swallowing_effect")
    try:
        SideEffect.objects.create(id=SideEffect.objects.order_by("pk").values_list("pk", flat=True).last())
    except DatabaseError:
        pass
    return "carried on"


@tool(risk=Risk.LOW)
def suspending_effect(note: Annotated[str, Param("Free text handed to the outside executor.")]) -> str:
    """Suspend mid-call: the result comes from outside (``POST /api/v1/calls/{id}/result/``)."""
    raise ToolSuspend("waiting for the outside executor", {"note": note})


class EffectStage(enum.Enum):
    """The stages of ``effect_workflow``."""

    OPEN = "open"
    RECORDED = "recorded"
    DONE = "done"


#: A state machine the worker tests resume across a restart: record an effect, then a risky one, then nothing.
EFFECT_WORKFLOW = StateMachineTool(
    "effect_workflow",
    "Record an effect, then a risky one.",
    EffectStage,
    start=EffectStage.OPEN,
    states={
        EffectStage.OPEN: [Transition(record_effect, to=EffectStage.RECORDED)],
        EffectStage.RECORDED: [Transition(risky_effect, to=EffectStage.DONE)],
    },
)


#: An agentic tool the worker tests run on a real worker: an inner model (agent ``effect-brain``) records effects.
EFFECT_DESK = SimpleAgenticTool(
    "effect_desk",
    "Record the effects a task needs.",
    tools=[record_effect, always_fails],
    max_iterations=4,
    agent="effect-brain",
)


class ResearchTask(BaseModel):
    """What the ``researcher`` subagent is asked to do."""

    task: Annotated[str, Param("The task for the researcher.")]


#: The agent named ``researcher`` (made by the test that uses it) as a tool: its call runs as a child run.
ask_researcher = Subagent.of(
    "researcher", "Ask the researcher agent to do a task.", ResearchTask, name="ask_researcher"
)
