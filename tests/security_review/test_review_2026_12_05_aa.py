"""Review of 2026-12-05 (aa): bad input and resource exhaustion, as "every bad input gets a clear error, nothing
executed twice, nothing lost".

Each test fails on the reviewed code (main at a0c4d88) and states who reaches what, where ("Found: ...") and what
is expected ("Expect: ...").

Findings: a tool returning an integer too long to write out as JSON (more than ``sys.get_int_max_str_digits()``,
4,300 digits) ran, then its outcome's write raised ``ValueError`` (``toolhub.storable`` let it through): the call
stayed ``running`` with its result lost, and the reconciler queued an idempotent or atomic tool's call again at
every lease, forever; a crafted catalogue cursor (``/api/v1/tools/?cursor=``) whose position held a NUL (hidden
from the address check by base64) was a 500 on PostgreSQL; a ``Progress`` note holding a NUL (PostgreSQL) or a NaN
or infinity (every database) failed the tool mid-run with a database error from the progress write.

Checked and found holding (no test here), on SQLite and PostgreSQL: ``POST /api/v1/calls/`` answers 400 with a
message and stores nothing runnable for a tool name over 200 characters, a non-object or non-JSON ``arguments``,
``1e400``, ``NaN``, a 5,000-digit integer, a lone surrogate, invalid UTF-8, arguments over
``MAX_ARGUMENTS_BYTES`` (a long key too), an idempotency key over 255 or a saga id over 100 characters, a context
value that is not a short scalar, a list body; ``-0`` and ``1e-400`` arrive as ``0.0``; duplicate keys keep the
last; ``?wait=`` refuses ``abc``, ``-1``, ``nan``, ``inf``, ``1e400`` and ``0x10`` and caps a huge number. Lists:
``?page_size=`` negative, zero, non-numeric or huge falls back or caps at 500; ``?ordering=`` is ignored (no
ordering filter); bad filter values are a 400 naming the filter; a huge integer id in a path is a 404; the other
lists' crafted cursors are a 404. The agent loop: 300 calls in one turn beyond ``max_tool_calls`` stop the run
(``max_tool_calls``, nothing executed); a 5,000-character or empty tool name, arguments that are not JSON, a JSON
list, ``1e400``, a 5,000-digit integer each make an ``invalid`` call the model reads a clear message about, and
the run goes on; duplicate call ids (review d). Approvals: ``round`` huge (409), non-numeric, negative or a float
(400), edits over the size or nesting bound, with unknown names or ``1e400`` (400, nothing recorded), comments
over 2,000 characters. The admin: every changelist as a superuser with ``?p=``, ``?o=``, ``?q=`` (5,000
characters, a percent-encoded surrogate, a UUID), bad date and integer lookups and ``__regex``: no 500.

Not fixed (noted): a local tool's result has no size bound (it is stored on the call and in the run's messages,
and sent to the model whole); tools are the developers' code, and ``ToolResult.artifact`` is the documented way
to keep large data off the model's context.
"""

import base64
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.helpers import RequestCall
from toolhub import Tool, registry
from toolhub.models import CallStatus
from toolhub.sweeper import calls_reconcile_expired_leases
from toolhub.tools.progress import Progress

pytestmark = pytest.mark.django_db

#: How often each test tool ran.
runs: list[str] = []


def _factorial_digits() -> int:
    """Return a number a model asked to compute (10**5000: 5,001 digits)."""
    runs.append("big")
    return 10**5000


def test_a_tool_returning_an_integer_too_long_for_json_fails_its_call_instead_of_losing_its_outcome(
    request_call: RequestCall, alice: User
) -> None:
    """alice (or her model) calls an idempotent tool that computes a large integer (a factorial, a power).

    Found: ``toolhub.outcomes.run_outcome`` checks the result with ``toolhub.storable.json_storage_problem``,
    which let an integer of more than ``sys.get_int_max_str_digits()`` (4,300) digits through; writing the outcome
    (``execution._finish`` -> ``json.dumps``) then raised ``ValueError`` after the tool ran. The call stayed
    ``running`` with nothing recorded, and at its lease's end the reconciler queued the idempotent (or atomic)
    tool's call again, which ran it again and lost it again, at every lease.
    Expect: the call fails once, with the message every unserializable result gets; the tool ran once; nothing is
    left for the reconciler; the audit chains verify.
    """
    runs.clear()
    tool = Tool.from_function(_factorial_digits, name="review_aa_factorial", risk="low", idempotent=True)
    with registry.temporarily(tool):
        call = request_call("review_aa_factorial", {}, alice, tenant="acme")
        assert calls_reconcile_expired_leases() == {"requeued": 0, "needs_attention": 0}

    assert call.status == CallStatus.FAILED, call.status
    assert call.error == "The tool returned a value that cannot be serialized to JSON."
    assert "more than 4300 digits" in call.error_detail
    assert runs == ["big"]
    call_command("verify_audit", "--no-progress", verbosity=0)


def test_an_integer_too_long_for_json_in_arguments_is_refused_with_a_message(
    request_call: RequestCall, alice: User
) -> None:
    """A program calls a tool through the Python services (an adapter, a task) with arguments it computed.

    Found: ``toolhub.arguments.parse_arguments`` asked ``json_value_problem`` (which passed the integer), then
    ``canonical_json`` raised ``ValueError`` out of ``tool_call_request``: no call, no message, a 500 or a crashed
    task.
    Expect: an ``invalid`` call whose error names the value, nothing executed.
    """
    call = request_call("calculate", {"a": 10**5000, "op": "*", "b": 2}, alice, tenant="acme")

    assert call.status == CallStatus.INVALID
    assert "more than 4300 digits" in call.error
    assert call.started_at is None


def _cursor(position: str) -> str:
    """A cursor as DRF encodes one (``p``: the position), crafted by the client."""
    return base64.b64encode(urlencode({"p": position}).encode()).decode()


def test_a_catalogue_cursor_holding_a_nul_is_an_invalid_cursor(alice: User) -> None:
    """alice, any logged-in user, crafts the catalogue's ``?cursor=`` (base64 of ``p=<position>``).

    Found: ``toolhub.api.pagination.decode_cursor`` checked the position only for lists ordered by time; the
    catalogue (``ByNameCursorPagination``, ordered by name) put it into its query as it came. A NUL in it, which the
    base64 hides from ``StorableAddressMiddleware``, was a 500 on PostgreSQL (``DataError``; SQLite answered a page).
    Expect: 404 "Invalid cursor", as every other list answers a crafted cursor; an ordinary position still pages.
    """
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(alice)

    answer = client.get("/api/v1/tools/", {"cursor": _cursor("calc\x00ulate")})

    assert answer.status_code == 404, answer.content
    assert answer.json() == {"detail": "Invalid cursor"}
    assert client.get("/api/v1/tools/", {"cursor": _cursor("calculate")}).status_code == 200


def _report_a_file(progress: Progress) -> str:
    """Process a file whose name holds a NUL (as an archive's may)."""
    progress.update("read a\x00b.txt", current=1, total=2)
    runs.append("file")
    return "done"


def _report_a_rate(progress: Progress) -> str:
    """Process nothing, reporting a rate of 0/0."""
    progress.update("rate", current=float("nan"), total=10)
    runs.append("rate")
    return "done"


def test_a_progress_note_holding_a_nul_is_stored_written_out(
    request_call: RequestCall, alice: User, settings: Any
) -> None:
    """A tool reports progress with text it read (a file name holding a NUL).

    Found: ``Progress.update`` stored the message as given; on PostgreSQL the progress write (in the tool's own
    run, ``execution._progress_of``) raised ``DataError``, failing the tool halfway with a database error (an
    atomic tool's transaction aborted); on SQLite the NUL was stored, unlike every other text a tool gives.
    Expect: the tool runs to its end; the note is stored with the NUL written out (``storable_text``).
    """
    settings.TOOLHUB = {**settings.TOOLHUB, "PROGRESS_MIN_INTERVAL_SECONDS": 0}
    runs.clear()
    tool = Tool.from_function(_report_a_file, name="review_aa_progress_file", risk="low")
    with registry.temporarily(tool):
        call = request_call("review_aa_progress_file", {}, alice, tenant="acme")

    assert call.status == CallStatus.SUCCEEDED, call.error_detail
    assert runs == ["file"]
    assert call.progress[-1]["message"] == "read a\\u0000b.txt"


def test_a_progress_number_that_is_not_finite_is_refused_before_anything_is_written(
    request_call: RequestCall, alice: User
) -> None:
    """A tool reports ``current=float("nan")`` (a rate of 0/0).

    Found: ``Progress.update`` checks ``current < 0`` and ``total <= 0``, both false for NaN, and stored it: the
    progress write failed on every database (PostgreSQL: ``Token "NaN" is invalid``; SQLite: the column's
    ``JSON_VALID`` check), inside the tool's run, so the tool failed with a database error (an atomic tool's
    transaction aborted).
    Expect: refused as a negative number is (``ValueError`` naming it, in the call's detail for operators), before
    any write; the call fails cleanly.
    """
    runs.clear()
    tool = Tool.from_function(_report_a_rate, name="review_aa_progress_rate", risk="low")
    with registry.temporarily(tool):
        call = request_call("review_aa_progress_rate", {}, alice, tenant="acme")

    assert call.status == CallStatus.FAILED
    assert "Progress current is not a finite number" in call.error_detail
    assert call.progress == []
    assert runs == []
    call_command("verify_audit", "--no-progress", verbosity=0)
