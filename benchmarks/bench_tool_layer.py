"""Benchmark of the tool layer: registration and schemas at startup, argument validation, per-call overhead.

Run ``python -m benchmarks.bench_tool_layer [--cpu-time]``: prints a markdown table and writes
``benchmarks/results/tool_layer.json``. ``run()`` returns the same figures as a dict.
"""

import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "tool_layer.json"

TOOLS = 1_000
CALLS = 20_000

#: Wall time by default; ``--cpu-time`` measures this process's CPU time instead, which other processes on a
#: loaded machine disturb less (for comparing two versions of the code on a shared machine).
_clock = time.perf_counter


def _setup_django() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
    import django

    django.setup()


def _make_functions(count: int) -> list[Callable[..., Any]]:
    """``count`` distinct functions with typed, described parameters, as developers write them."""
    from pydantic import Field

    from toolhub import Param, ToolContext

    namespace: dict[str, Any] = {
        "Annotated": Annotated,
        "Param": Param,
        "Field": Field,
        "Decimal": Decimal,
        "dt": dt,
        "ToolContext": ToolContext,
    }
    shapes = [
        "customer_id: Annotated[str, Param('The customer.')], limit: Annotated[int, Field(ge=1, le=100)] = 10",
        "amount: Annotated[Decimal, Param('How much.')], day: dt.date, note: str | None = None",
        "query: str, tags: list[str], ctx: ToolContext",
        "a: float, b: float, exact: bool = False",
    ]
    functions = []
    for index in range(count):
        source = (
            f"def tool_{index}({shapes[index % len(shapes)]}):\n"
            f"    '''Tool number {index}.\n\n    Does one thing well.\n    '''\n"
            "    return 1\n"
        )
        exec(source, namespace)  # noqa: S102 - generated benchmark fixtures
        functions.append(namespace[f"tool_{index}"])
    return functions


def _per_call_us(fn: Callable[[], Any], repeat: int) -> float:
    """Median of 5 rounds of ``repeat`` calls, in microseconds per call."""
    rounds = []
    for _ in range(5):
        started = _clock()
        for _ in range(repeat):
            fn()
        rounds.append((_clock() - started) / repeat * 1e6)
    return statistics.median(rounds)


def bench_registration(count: int = TOOLS) -> dict[str, float]:
    """Startup: make and register ``count`` tools (schemas lazy), then build every schema, then read them cached."""
    from toolhub.tools.definition import Tool
    from toolhub.tools.registry import ToolRegistry

    functions = _make_functions(count)
    target = ToolRegistry()
    started = _clock()
    for fn in functions:
        target.register(Tool.from_function(fn))
    target.freeze()
    registered = _clock()
    for built in target.all():
        built.json_schema  # noqa: B018
        built.version  # noqa: B018 - the catalogue sync needs both at startup
    schemas = _clock()
    for built in target.all():
        built.json_schema  # noqa: B018
        built.version  # noqa: B018
    cached = _clock()
    for built in target.all()[:100]:
        built.input_model  # noqa: B018
    models = _clock()
    return {
        "tools": count,
        "registration_s": round(registered - started, 4),
        "schema_generation_s": round(schemas - registered, 4),
        "registration_plus_schemas_s": round(schemas - started, 4),
        "cached_schema_read_us_per_tool": round((cached - schemas) / count * 1e6, 3),
        "input_model_on_first_validation_ms_per_tool": round((models - cached) / 100 * 1e3, 3),
    }


def bench_calls(repeat: int = CALLS) -> dict[str, float]:
    """Validation per call, and the tool layer's overhead against calling the bare function."""
    from pydantic import Field

    from toolhub import Param, ToolContext
    from toolhub.tools.definition import Tool

    def quote(
        customer_id: Annotated[str, Param("The customer.")],
        amount: Annotated[Decimal, Field(gt=0)],
        day: dt.date,
        express: bool = False,
    ) -> Decimal:
        """Quote a price."""
        return amount * (2 if express else 1)

    def quote_with_context(
        customer_id: str, amount: Decimal, day: dt.date, ctx: ToolContext, express: bool = False
    ) -> Decimal:
        """Quote a price for the context's tenant."""
        return amount

    built = Tool.from_function(quote)
    with_ctx = Tool.from_function(quote_with_context)
    raw = {"customer_id": "C-1", "amount": "12.50", "day": "2025-01-31", "express": True}
    validated = built.validate_arguments(raw)
    ctx = ToolContext(tenant="acme", call_id="c-1")
    built.json_schema  # noqa: B018 - built once, like at startup

    bare = _per_call_us(lambda: quote(**validated), repeat)
    validate = _per_call_us(lambda: built.validate_arguments(raw), repeat)
    invoke = _per_call_us(lambda: built.invoke(validated, ctx), repeat)
    layer = _per_call_us(lambda: built.invoke(built.validate_arguments(raw), ctx), repeat)
    layer_ctx = _per_call_us(lambda: with_ctx.invoke(with_ctx.validate_arguments(raw), ctx), repeat)
    timed = _per_call_us(lambda: built.invoke(built.validate_arguments(raw), ctx, timeout=300), repeat // 4)
    return {
        "bare_function_us": round(bare, 3),
        "validation_us": round(validate, 3),
        "invoke_validated_us": round(invoke, 3),
        "validate_and_invoke_us": round(layer, 3),
        "validate_and_invoke_with_context_us": round(layer_ctx, 3),
        "validate_and_invoke_with_timeout_us": round(timed, 3),
        "overhead_ratio_vs_bare": round(layer / bare, 1),
        "overhead_ratio_with_timeout_vs_bare": round(timed / bare, 1),
    }


def run() -> dict[str, Any]:
    """Measure everything once; return the figures (also what ``__main__`` writes)."""
    _setup_django()
    import platform

    registration, calls = bench_registration(), bench_calls()
    return {
        "benchmark": "tool_layer",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "registration": registration,
        "calls": calls,
        # rows of the table `make bench` prints (benchmark | toolhub | baseline | ratio | goal)
        "rows": [
            f"| register 1,000 tools + build every schema | {registration['registration_plus_schemas_s']:.3f} s "
            f"(registration {registration['registration_s']:.3f} s) | - | - | at most 1 s |",
            f"| argument validation per call | {calls['validation_us']:.1f} µs | - | - | microseconds |",
            f"| tool layer per call (validate + invoke) | {calls['validate_and_invoke_us']:.1f} µs | bare function "
            f"{calls['bare_function_us']:.2f} µs | {calls['overhead_ratio_vs_bare']}x | measured |",
            f"| tool layer per call with its timeout armed | {calls['validate_and_invoke_with_timeout_us']:.1f} µs | "
            f"bare function {calls['bare_function_us']:.2f} µs | {calls['overhead_ratio_with_timeout_vs_bare']}x | "
            "measured |",
        ],
    }


def _markdown(results: dict[str, Any]) -> str:
    reg, calls = results["registration"], results["calls"]
    rows = [
        ("Register 1,000 tools (signatures, docstrings, type checks; schemas lazy)", f"{reg['registration_s']:.3f} s"),
        ("Build the 1,000 JSON Schemas and version hashes (first use)", f"{reg['schema_generation_s']:.3f} s"),
        ("Registration + every schema (the 1 s budget)", f"{reg['registration_plus_schemas_s']:.3f} s"),
        ("Cached schema + version read, per tool", f"{reg['cached_schema_read_us_per_tool']:.2f} µs"),
        (
            "Input model, built on a tool's first validation, per tool",
            f"{reg['input_model_on_first_validation_ms_per_tool']:.2f} ms",
        ),
        ("Bare function call", f"{calls['bare_function_us']:.2f} µs"),
        ("Argument validation per call (4 params, Decimal/date)", f"{calls['validation_us']:.2f} µs"),
        ("Invoke with validated arguments", f"{calls['invoke_validated_us']:.2f} µs"),
        ("Tool layer per call: validate + invoke", f"{calls['validate_and_invoke_us']:.2f} µs"),
        ("… with an injected ToolContext", f"{calls['validate_and_invoke_with_context_us']:.2f} µs"),
        ("… with a timeout (SIGALRM armed and cleared)", f"{calls['validate_and_invoke_with_timeout_us']:.2f} µs"),
        ("Tool layer / bare function", f"{calls['overhead_ratio_vs_bare']}x"),
        ("Tool layer with timeout / bare function", f"{calls['overhead_ratio_with_timeout_vs_bare']}x"),
    ]
    lines = ["| measure | value |", "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)]
    return "\n".join(lines)


if __name__ == "__main__":
    if "--cpu-time" in sys.argv[1:]:
        _clock = time.process_time
    figures = run()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(_markdown(figures))
    print(f"\nPython {figures['python']}, {figures['cpus']} CPUs; JSON in {RESULTS.relative_to(ROOT)}")
