"""Review 2026-12-05 (ch): the tenant trail export and its offline verifier, tool outcomes read after the tool ran.

Findings:
- ``python -m toolhub.audit_file_verify`` passed a file with forged events appended after the header's span
  and head (it reported lines added before a chain's declared start, never after its end).
- The verifier's warning that a file rewritten whole verifies too was silenced by a checkpoint section in the
  file itself, which the file's writer (or a forger) chooses; offline its signature is not checked.
- A result dict whose keys collide as JSON text (``200`` and ``"200"``) inside a dataclass or a pydantic model
  (the usual tool return types) still lost values silently: the key check walked plain dicts and lists only.
- A ``ToolResult.error`` value whose ``__str__`` calls ``sys.exit()`` escaped ``run_outcome``'s outer guard
  (``Exception`` only), leaving the call ``running``: the read phase did not take ``TOOL_EXITS``.
- An endpoint reporting usage as zeros beside a prompt and an answer made every turn free (only a field left
  out was estimated): a run's or subagent's ``max_tokens`` bound nothing.
- A header whose checkpoint section names a chain that is not a number, or a head hash that is not text, made
  the verifier die with a traceback instead of naming the altered header.

Checked and found holding (no test here): the export reads only the tenant's own chain range and its own
events (heads and spans of chains in that range only; a slug sharing the range is refused; checkpoint heads
filtered to exported chains, ``stored_run`` scoped to them); the verifier rejects a line with extra or missing
keys, a float or text ``chain``/``seq``, a line of a chain not in the header, a chain resumed after another, a
seq-1 line with a previous hash; JSON unicode escapes and duplicate keys parse to what is hashed (the hash is
recomputed from the parsed values, so neither lets a changed line pass); every hash of events with non-ASCII
(U+2028, U+0085, emoji, DEL, control characters), 2**70 and -2**63, nested lists/dicts, nulls, ``Decimal``,
microsecond datetimes, list and text payloads is reproduced offline exactly as ``verify_audit`` does, on
SQLite and PostgreSQL; under ASGI a client disconnect ends in ``response.close()`` on the request's own thread
(Django 5.2 ``ASGIHandler.handle``), which closes the export's generator inside its ``atomic`` (rolled back,
server-side cursor closed), and an exception mid-stream leaves the generator's ``atomic`` by the exception; a
suspended tool's expiry counts from its suspension (``queued_at`` set then); migrations approvals 0008 /
toolhub 0033 map 0 to NULL, read identically before and after (reverse is a no-op, harmless); the key walk of
``to_json_value`` on a 1.2 MB result of 8,000 dicts costs ~40-50 ms beside ~25 ms of conversion (no slower
than before the fix), str-keyed dicts, OrderedDict, enum keys and distinct int keys pass.

Not fixed: a JSON line with duplicate keys parses to its last value (a person reading the file may read the
first); a refused stream (past ``MAX_EXTERNAL_RESULT_BYTES`` or broken off) charges the run nothing for the
tokens the endpoint produced before it was given up.
"""

import dataclasses
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from pydantic import BaseModel

from agents_app.models_adapters.base import CHARS_PER_TOKEN, estimated_tokens
from agents_app.models_adapters.openai_chat import OpenAIChatAdapter
from tests.audit.test_trail_export import export, read, trails, verified, write  # noqa: F401 - trails: a fixture (used by name)
from tests.helpers import RequestCall
from tests.unit.fake_openai import FakeModel, completion, serve, streamed
from toolhub import Tool, registry
from toolhub.audit_hash_core import HASHED_COLUMNS, hash_text
from toolhub.models import CallStatus
from toolhub.tools.results import ToolResult

pytestmark = pytest.mark.django_db


def _forged_after(line: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The next line of ``line``'s chain, hashed consistently as a forger would."""
    forged = {**line, "seq": line["seq"] + 1, "prev_hash": line["hash"], **changes}
    forged["hash"] = hash_text(*(forged[column] for column in HASHED_COLUMNS))
    return forged


@pytest.mark.usefixtures("trails")
def test_forged_lines_after_the_headers_span_and_head_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A forger appends a consistent ``call.approved`` to a chain of a genuine export, header untouched.

    Found: the verifier compared a chain's end with the header's span only when it was short of it, and the
    header's head only when the file's last line had the head's seq: the file verified (exit 0).
    Expect: lines past the header's span are reported as added, and the head the header names must be there.
    """
    header, events = read(export(tmp_path))
    last = events[-1]
    events.append(_forged_after(last, event_type="call.approved", actor="user:mallory"))

    code, output = verified(write(tmp_path / "t.jsonl", header, events), capsys=capsys)

    assert code == 1, output
    assert f"chain {last['chain']}" in output and "added" in output


@pytest.mark.usefixtures("trails")
def test_a_checkpoint_section_in_the_file_does_not_silence_the_rewrite_warning(
    tmp_path: Path, audit_key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file rewritten whole, with a checkpoint section of the forger's own naming its forged heads.

    Found: ``main`` printed "a file rewritten whole and consistently would verify too" only when the file
    named no checkpoint, so a forger silenced it by writing one (offline its signature is not checked).
    Expect: without ``--head`` the warning is printed whatever the file says of itself.
    """
    call_command("audit_checkpoint", stdout=io.StringIO())
    header, events = read(export(tmp_path))
    assert header["checkpoint"] is not None
    code, output = verified(tmp_path / "out.jsonl", capsys=capsys)

    assert code == 0
    assert "rewritten whole and consistently would verify too" in output


@dataclasses.dataclass
class _Report:
    counts: dict[Any, str]


class _ReportModel(BaseModel):
    counts: dict[Any, str]


def _dataclass_report() -> _Report:
    """Count orders by status code, ints from one source and strings from another."""
    return _Report(counts={200: "12 orders", "200": "3 orders"})


def _model_report() -> _ReportModel:
    """Count orders by status code, ints from one source and strings from another."""
    return _ReportModel(counts={200: "12 orders", "200": "3 orders"})


@pytest.mark.parametrize("handler", [_dataclass_report, _model_report])
def test_colliding_keys_inside_a_dataclass_or_model_fail_the_call(
    request_call: RequestCall, alice: User, handler: Any
) -> None:
    """A tool returns a dataclass (or a pydantic model) holding ``{200: ..., "200": ...}``.

    Found: ``_check_no_merged_keys`` walked plain dicts, lists and tuples beside the conversion; behind a
    dataclass or a model the call succeeded with ``{"counts": {"200": "3 orders"}}``, a value dropped silently.
    Expect: the call fails as a result that cannot be serialized, the collision named in the detail.
    """
    tool = Tool.from_function(handler, name="review_ch_report", risk="low", allow_any=True)
    with registry.temporarily(tool):
        call = request_call("review_ch_report", {}, alice, tenant="acme")

    assert call.status == CallStatus.FAILED, call.result
    assert "collide" in call.error_detail


class _Exiting:
    def __str__(self) -> str:
        sys.exit(3)


def _error_that_exits() -> ToolResult:
    """Report a failure whose message is read through a command-line library."""
    return ToolResult(kind="error", value=_Exiting())


def test_a_result_that_calls_sys_exit_when_read_fails_its_call(request_call: RequestCall, alice: User) -> None:
    """A tool returns ``ToolResult.error`` with a value whose ``__str__`` calls ``sys.exit()``.

    Found: ``run_outcome``'s outer guard caught ``Exception`` only; the ``SystemExit`` raised while the result
    was read escaped the pipeline (the call left ``running``; on a worker, the pool process ended).
    Expect: the call fails like any tool whose result cannot be read.
    """
    tool = Tool.from_function(_error_that_exits, name="review_ch_exits", risk="low", allow_any=True)
    with registry.temporarily(tool):
        try:
            call = request_call("review_ch_exits", {}, alice, tenant="acme")
        except SystemExit:
            pytest.fail("SystemExit escaped the pipeline")

    assert call.status == CallStatus.FAILED
    assert "SystemExit" in call.error_detail


def test_usage_reported_as_zero_beside_text_is_estimated() -> None:
    """An endpoint (or a proxy in front of it) fills its usage with zeros, streamed or not.

    Found: ``reported_or_estimated`` estimated only a field left out; ``{"prompt_tokens": 0,
    "completion_tokens": 0}`` beside a long prompt and an answer made every turn free again, and a run's or a
    subagent's ``max_tokens`` budget bound nothing.
    Expect: a zero beside text is taken for "not counted" and estimated from the text's length.
    """
    messages = [{"role": "user", "content": "Please add six and seven. " * 40}]
    with serve(FakeModel()) as model:
        model.queue(completion(content="Thirteen, as asked.", prompt=0, done=0))
        model.queue(streamed(content=["Thirteen", ", as asked."], prompt=0, done=0))
        for stream in (False, True):
            adapter = OpenAIChatAdapter(
                provider_name="zeros", base_url=model.base_url, model="m", api_key="k", stream=stream, deadline=10.0
            )
            turn = adapter.complete(messages=messages, tools=[])

            assert turn.prompt_tokens >= len(messages[0]["content"]) // CHARS_PER_TOKEN, stream
            assert turn.completion_tokens == estimated_tokens(len("Thirteen, as asked.")), stream


@pytest.mark.usefixtures("trails")
@pytest.mark.parametrize(
    "checkpoint",
    [
        {"seq": 1, "heads": {"not-a-chain": {"seq": 1, "hash": "0" * 64}}},
        {"seq": 1, "heads": {"CHAIN": {"seq": 1, "hash": ["not", "text"]}}},
    ],
)
def test_a_malformed_checkpoint_section_is_reported_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], checkpoint: dict[str, Any]
) -> None:
    """A file whose header's checkpoint names a chain that is not a number, or a head hash that is not text.

    Found: ``_ends`` read ``int(number)`` and looked the hash up unchecked: the verifier died with a
    ``ValueError``/``TypeError`` traceback instead of naming the altered header.
    Expect: exit 1 with the header reported as altered.
    """
    header, events = read(export(tmp_path))
    chain = str(events[0]["chain"])
    header["checkpoint"] = json.loads(json.dumps(checkpoint).replace("CHAIN", chain))

    code, output = verified(write(tmp_path / "t.jsonl", header, events), capsys=capsys)

    assert code == 1
    assert "checkpoint" in output and "altered" in output
