"""Tools used by the integration and fault-injection tests."""

import time
from typing import Annotated

from tests.testapp.models import SideEffect
from toolhub import Param, Risk, ToolContext, ToolError, tool


@tool
def record_effect(note: Annotated[str, Param("Free text stored with the effect.")], ctx: ToolContext) -> dict:
    """Record one side effect (not idempotent): each execution adds exactly one row."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="record_effect", note=note)
    return {"effect_id": effect.pk}


@tool(risk=Risk.HIGH)
def risky_effect(note: Annotated[str, Param("Free text stored with the effect.")], ctx: ToolContext) -> dict:
    """Record one side effect; high risk, so it always waits for an operator."""
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="risky_effect", note=note)
    return {"effect_id": effect.pk}


@tool
def slow_effect(seconds: Annotated[float, Param("How long to work before recording.")], ctx: ToolContext) -> dict:
    """Sleep, then record one side effect (not idempotent): a window for killing the worker."""
    time.sleep(seconds)
    effect = SideEffect.objects.create(call_id=ctx.idempotency_key or "", tool="slow_effect")
    return {"effect_id": effect.pk}


@tool(idempotent=True)
def slow_idempotent(seconds: Annotated[float, Param("How long to work.")], ctx: ToolContext) -> dict:
    """Sleep, then record a side effect; idempotent, so it may be retried after a worker dies."""
    time.sleep(seconds)
    SideEffect.objects.get_or_create(call_id=ctx.idempotency_key or "", tool="slow_idempotent")
    return {"done": True}


@tool
def always_fails(reason: Annotated[str, Param("What to fail with.")]) -> str:
    """Fail with a tool error meant for the model."""
    raise ToolError(f"failed as asked: {reason}")


@tool
def crashes() -> str:
    """Fail with an unexpected exception whose details must not reach the model."""
    raise RuntimeError("secret internal detail: db password is hunter2")
