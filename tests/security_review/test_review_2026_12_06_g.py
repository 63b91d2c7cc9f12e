"""Review of 2026-12-06 (g): the exported audit trail and its offline verifier, as a forger holding an export file
and the public key (not the signing key), and as one tenant's auditor reaching for another's trail.

Findings:

1. The verifier read a line's ``call_id`` and ``run_id`` loosely: any JSON value that is false (``""``, ``0``,
   ``false``, ``[]``, ``{}``) hashes as ``null`` (``hash_text`` writes a missing id as null), so a line showing
   one of them in place of ``null`` verified under a valid signature. The verifier now reads each hashed column
   as the export writes it (text; an id text or null), like the strict reading of numbers and keys.
2. The verifier quoted the file's own text whole in its messages (a line's tenant, once per line; the header's
   tenant, version and checkpoint seq, the latter once per checkpoint entry, before any signature is checked): a
   crafted file made its output and the problems it holds grow with the file, against its constant-memory claim.
   Every quoted value is now cut to a bounded prefix (``audit_file_verify._shown``).
3. A line of characters Python's ``str.strip`` removes but JSON does not count as whitespace (no-break space,
   ``\\x1c``-``\\x1f``, ``\\u2028``, ...) was skipped as blank: any content spelled in them could be added to a signed
   file that still verified (jq refuses it). Only JSON's whitespace makes a line blank now.
4. Every problem was held as a message until the end, one per bad line: a file of many short bad lines grew the
   verifier's memory with its length (against its constant-memory claim). The first ``MAX_PROBLEMS`` are named,
   the rest counted (``FileVerification.problem``); the total is still printed.

Checked and holding (no test here): reordered, repeated, dropped first or last lines of a span (against the
header's seqs and its signed ``to_hash``); two exports of one tenant spliced, or one's signed header on the
other's body (spans and ``to_hash`` pin every line); a line of another tenant or chain; a changed timestamp,
actor, tenant, payload, key order inside ``data`` (hashed as text), NFC/NFD spelling (hashed as written); a
duplicate key, NaN, Infinity, ``1e400``, ``1.0`` for a seq, ints past 4300 digits; a BOM (line 1 is not JSON);
CRLF line ends (the same lines); non-JSON trailing lines; an overlong line; a header field changed or ``to_hash``
removed from a new header (the signature covers the whole header but its own value); the console's export and
"Verify now" check the viewer's boundary before the tenant is looked up (a retired slug of another tenant answers
404 like any other); the DB verifier's messages are built from numbers and fixed text.

Not fixed: a signed header from before ``to_hash`` (exports made between reviews cj and db) whose span ends short
of the head still verifies (exit 0, with a note that its lines are the file's own word), so such a file's lines can
be rewritten consistently under a valid signature; review db chose this and tests it
(``test_a_signed_range_from_before_spans_named_their_end_says_its_lines_are_unvouched``). Making it a problem under
``--public-key`` (as an HMAC-only header is) is a policy call left to the lead.
"""

import itertools
import json
import tracemalloc
from pathlib import Path

import pytest

from tests.security_review.trail_exports import acme_trail, export, public_key
from toolhub.audit_file_verify import main as verify_main


@pytest.fixture
def trail(db: None, audit_key: str) -> None:
    """acme's events in one chain, each with a call id and no run id (``run_id`` null)."""
    acme_trail(3)


def verified(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = verify_main([str(path), "--public-key", public_key()])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("shown", ["", 0, False, [], {}, 0.0])
def test_a_null_id_shown_as_another_false_value_is_reported(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], shown: object
) -> None:
    """Found: a line's ``run_id`` (null) rewritten as ``""``, ``0``, ``false``, ``[]``, ``{}`` or ``0.0`` verified
    under the genuine signature (each hashes as null). Expect: the line is reported as altered."""
    path = export(tmp_path)
    assert verified(path, capsys)[0] == 0
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    event = json.loads(lines[1])
    assert event["run_id"] is None
    event["run_id"] = shown
    lines[1] = json.dumps(event)
    path.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    code, output = verified(path, capsys)
    assert code == 1 and "line 3" in output and "altered" in output


def test_the_verifiers_messages_stay_short_whatever_the_file_holds(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: the verifier quoted the file's own text whole in its messages: a line's tenant (once per line), the
    header's tenant, version and checkpoint seq (once per checkpoint entry), so a crafted file made messages, and
    the list holding them, grow with its size. Expect: every message quotes at most a bounded prefix."""
    path = export(tmp_path)
    header_text, *lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(header_text)
    big = "x" * 50_000
    header["checkpoint"] = {"seq": big, "heads": {str(n): {"seq": 1, "hash": "0" * 64} for n in range(3)}}
    foreign = [json.dumps({**json.loads(line), "tenant": big}) for line in lines]
    path.write_text("\n".join([json.dumps(header), *foreign]) + "\n", encoding="utf-8")
    code, output = verified(path, capsys)
    assert code == 1 and "an event of tenant 'xxx" in output and "signed checkpoint #'xxx" in output
    assert max(len(line) for line in output.splitlines()) < 1000

    header["version"] = big
    path.write_text(json.dumps(header) + "\n", encoding="utf-8")
    code, output = verified(path, capsys)
    assert code == 1 and "format version 'xxx" in output and len(output) < 1000


@pytest.mark.parametrize("garbage", ["\u00a0", "\x1c\x1d\x1e\x1f", "\u2028\u3000", "\x0b\x0c", "\x85"])
def test_a_line_of_non_json_whitespace_is_reported(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], garbage: str
) -> None:
    """Found: a line holding only characters Python counts as whitespace but JSON does not (no-break space, the
    information separators, line and paragraph separators) was skipped as blank, so anything spelled in them could be
    appended to or slipped between a signed file's lines, which still verified (and which jq refuses). Expect: the line
    is reported as not JSON; a line blank in JSON's sense is still skipped."""
    path = export(tmp_path)
    path.write_text(path.read_text(encoding="utf-8") + " \t\n", encoding="utf-8")
    assert verified(path, capsys)[0] == 0
    path.write_text(path.read_text(encoding="utf-8") + garbage * 100 + "\n", encoding="utf-8")
    code, output = verified(path, capsys)
    assert code == 1 and "is not JSON: it was altered or cut" in output


def test_a_file_of_many_bad_lines_is_verified_in_bounded_memory(
    trail: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: every problem was held as a message until the end, one per bad line, so a file of short bad lines
    (``x``, a few bytes each) grew the verifier's memory with its length, against its constant-memory claim.
    Expect: the first ``MAX_PROBLEMS`` are named, the rest counted; memory stays flat; the verdict and total hold."""
    from toolhub import audit_file_verify

    header = export(tmp_path).read_text(encoding="utf-8").splitlines()[0]
    bad = 60_000
    tracemalloc.start()
    try:
        result = audit_file_verify.verify_export_lines(itertools.chain([header], itertools.repeat("x\n", bad)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_500_000, peak
    assert len(result.problems) == audit_file_verify.MAX_PROBLEMS and len(result.problems) + result.unlisted > bad
