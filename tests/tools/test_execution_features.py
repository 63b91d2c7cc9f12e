"""On the worker (eager here): timeouts, progress, artifacts, results and errors."""

import datetime as dt
import enum
import time
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from pydantic import BaseModel
from rest_framework.test import APIClient

from tests.helpers import RequestCall, event_types
from toolhub import Progress, ToolError, ToolResult, registry, tool
from toolhub.models import AuditEvent, CallStatus, ToolCallArtifact


@tool(timeout=0.2)
def sleepy(seconds: float) -> str:
    """Sleep for a while."""
    time.sleep(seconds)
    return "awake"


def test_a_call_over_its_timeout_fails_with_a_clear_error(request_call: RequestCall) -> None:
    with registry.temporarily(sleepy):
        started = time.monotonic()
        late = request_call("sleepy", {"seconds": 3})
        elapsed = time.monotonic() - started
        quick = request_call("sleepy", {"seconds": 0})

    assert late.status == CallStatus.FAILED
    assert late.error.startswith("Tool 'sleepy' did not finish within its time limit of 0.2 s and was stopped")
    assert elapsed < 2
    assert event_types(late)[-1] == "call.failed"
    assert quick.status == CallStatus.SUCCEEDED


def test_the_default_timeout_comes_from_settings(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "DEFAULT_TOOL_TIMEOUT_SECONDS": 42}

    @tool
    def plain() -> None:
        """Plain."""

    assert plain.tool.effective_timeout == 42.0
    assert sleepy.tool.effective_timeout == 0.2


@tool
def crunch(steps: int, progress: Progress) -> str:
    """Work in steps, reporting progress."""
    for step in range(1, steps + 1):
        progress.update(f"step {step}", current=step, total=steps)
    return f"crunched {steps}"


def test_progress_is_stored_on_the_call_shown_by_the_api_and_never_sent_to_the_model(
    request_call: RequestCall, alice: User, alice_client: APIClient
) -> None:
    assert list(crunch.tool.json_schema["properties"]) == ["steps"]

    with registry.temporarily(crunch):
        call = request_call("crunch", {"steps": 3}, user=alice)

    assert call.status == CallStatus.SUCCEEDED
    assert [u["message"] for u in call.progress] == ["step 1", "step 2", "step 3"]
    assert call.progress[-1]["fraction"] == 1.0
    assert "step" not in call.model_text()
    body = alice_client.get(f"/api/v1/calls/{call.id}/").json()
    assert body["progress"][-1]["current"] == 3


def test_progress_keeps_the_newest_and_refuses_nonsense() -> None:
    written: list[list[dict[str, Any]]] = []
    progress = Progress(written.append, keep=2)

    for step in range(5):
        progress.update(current=step, total=4)

    assert [u["current"] for u in progress.updates] == [3, 4]
    assert written[-1] == progress.updates
    import pytest

    with pytest.raises(ValueError):
        progress.update(total=0)
    with pytest.raises(ValueError):
        progress.update(current=-1)


@tool
def report(kind: str) -> Any:
    """Produce a report."""
    if kind == "csv":
        return ToolResult.artifact("a,b\n1,2\n", name="report.csv", media_type="text/csv", text="Report ready: 1 row.")
    if kind == "binary":
        return ToolResult.artifact(b"\x89PNG\r\n", name="chart.png", media_type="image/png")
    if kind == "huge":
        return ToolResult.artifact("x" * 200, name="huge.txt", media_type="text/plain")
    return ToolResult.artifact({"rows": [1, 2]}, name="rows.json")


def test_artifacts_are_stored_listed_and_downloadable(
    request_call: RequestCall, alice: User, alice_client: APIClient, settings: Any
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_ARTIFACT_BYTES": 100}
    with registry.temporarily(report):
        csv = request_call("report", {"kind": "csv"}, user=alice)
        png = request_call("report", {"kind": "binary"}, user=alice)
        rows = request_call("report", {"kind": "json"}, user=alice)
        huge = request_call("report", {"kind": "huge"}, user=alice)

    # the model reads a summary, never the data
    assert csv.model_text() == "Report ready: 1 row."
    assert png.model_text().startswith("Stored artifact 'chart.png' (image/png, 6 bytes)")
    assert "[1, 2]" not in rows.model_text()
    # the data is stored with the call and listed on it
    stored = ToolCallArtifact.objects.get(call=csv)
    assert (stored.name, stored.media_type, bytes(stored.content)) == ("report.csv", "text/csv", b"a,b\n1,2\n")
    listed = alice_client.get(f"/api/v1/calls/{png.id}/").json()["artifacts"]
    assert [(a["name"], a["size"]) for a in listed] == [("chart.png", 6)]
    download = alice_client.get(listed[0]["url"])
    assert download.status_code == 200 and download.content == b"\x89PNG\r\n"
    assert download["Content-Disposition"] == 'attachment; filename="chart.png"'
    assert download["X-Content-Type-Options"] == "nosniff"
    assert bytes(ToolCallArtifact.objects.get(call=rows).content) == b'{"rows": [1, 2]}'
    # and its hash is in the audit trail
    succeeded = AuditEvent.objects.get(call_id=csv.id, event_type="call.succeeded")
    assert succeeded.payload["artifact"]["sha256"] == stored.sha256
    # too large: the call fails and nothing is stored
    assert huge.status == CallStatus.FAILED and "larger than 100 bytes" in huge.error
    assert not ToolCallArtifact.objects.filter(call=huge).exists()


@tool
def listing(rows: int, text: bool = False) -> Any:
    """List rows, as a tool over a table the model may ask too much of."""
    if text:
        return "\x1f" * rows  # each is 6 bytes of JSON: short as text, long as stored
    return [{"row": index, "note": "é" * 10} for index in range(rows)]


def test_a_result_over_the_bound_fails_the_call_and_nothing_of_it_is_kept(
    request_call: RequestCall, alice: User, settings: Any
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "MAX_RESULT_BYTES": 1_000}
    with registry.temporarily(listing):
        small = request_call("listing", {"rows": 10}, user=alice)
        large = request_call("listing", {"rows": 100}, user=alice)
        escaped = request_call("listing", {"rows": 200, "text": True}, user=alice)

    assert small.status == CallStatus.SUCCEEDED and len(small.result) == 10
    for call in (large, escaped):
        call.refresh_from_db()
        assert call.status == CallStatus.FAILED and call.result is None
        assert "more than the 1,000 a result may hold (TOOLHUB['MAX_RESULT_BYTES'])" in call.model_text()
        assert "ToolResult.artifact" not in call.model_text()  # the developer's hint is for the operator
        assert "ToolResult.artifact" in call.error_detail
        failed = AuditEvent.objects.get(call_id=call.id, event_type="call.failed")
        assert "é" * 10 not in str(failed.payload) and "\x1f" * 10 not in str(failed.payload)
    assert "4,091 bytes" in large.error  # measured as stored: JSON, UTF-8


class Colour(enum.Enum):
    RED = "red"


class Receipt(BaseModel):
    total: Decimal
    at: dt.date
    colour: Colour


@tool
def outcome(kind: str) -> Any:
    """Return or fail in one of several ways."""
    if kind == "model":
        return Receipt(total=Decimal("9.90"), at=dt.date(2025, 1, 2), colour=Colour.RED)
    if kind == "none":
        return None
    if kind == "tool_error":
        raise ToolError("The order is closed; ask the user for another one.")
    if kind == "result_error":
        return ToolResult.error("No such customer.")
    if kind == "text":
        return ToolResult.text("exactly this")
    raise RuntimeError("password=hunter2 in the stack")


def test_results_and_errors_reach_the_model_as_intended(request_call: RequestCall) -> None:
    with registry.temporarily(outcome):
        calls = {
            kind: request_call("outcome", {"kind": kind})
            for kind in ("model", "none", "tool_error", "result_error", "text", "crash")
        }

    assert calls["model"].result == {"total": "9.90", "at": "2025-01-02", "colour": "red"}
    assert calls["none"].model_text() == "Done."  # TOOLHUB["NONE_RESULT_TEXT"], not "null"
    assert calls["text"].model_text() == "exactly this"
    assert calls["tool_error"].error == "The order is closed; ask the user for another one."
    assert calls["result_error"].error == "No such customer."
    crash = calls["crash"]
    assert crash.status == CallStatus.FAILED
    assert "hunter2" not in crash.error and "RuntimeError" in crash.error
    assert "hunter2" in crash.error_detail  # full detail kept for auditors only


def test_execution_errors_go_through_the_configured_handler(request_call: RequestCall, settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "ERROR_HANDLER": "tests.tools.test_execution_features.short_error"}

    with registry.temporarily(outcome):
        call = request_call("outcome", {"kind": "crash"})

    assert call.error == "short: RuntimeError"


def short_error(exc: BaseException) -> str:
    return f"short: {type(exc).__name__}"


def test_unknown_tool_names_get_the_closest_names_or_a_configured_answer(
    request_call: RequestCall, settings: Any
) -> None:
    with registry.temporarily(outcome, report):
        suggested = request_call("outcom", {})
        settings.TOOLHUB = {**settings.TOOLHUB, "UNKNOWN_TOOL_HANDLER": "tests.tools.test_execution_features.nope"}
        configured = request_call("outcom", {})

    assert suggested.status == CallStatus.INVALID
    assert suggested.error == "Unknown tool 'outcom'. Did you mean: outcome?"
    assert configured.error == "No tool outcom; there are tools."


def nope(name: str, available: list[str]) -> str:
    return f"No tool {name}; there are {'tools' if available else 'none'}."


def test_argument_errors_list_each_problem_without_echoing_sensitive_values(request_call: RequestCall) -> None:
    @tool(sensitive=("card",))
    def pay(card: str, amount: int, currency: str = "EUR") -> str:
        """Pay."""
        return "paid"

    with registry.temporarily(pay):
        call = request_call("pay", {"card": 4111111111111111, "amount": "lots", "extra": "x"})

    assert call.status == CallStatus.INVALID
    assert "- card: Input should be a valid string" in call.error
    assert "- amount: Input should be a valid integer" in call.error
    assert "- extra: Extra inputs are not permitted" in call.error
    assert "4111111111111111" not in call.error + call.raw_arguments
