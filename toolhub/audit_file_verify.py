"""Verify an exported audit trail (``manage.py audit_export``) offline: no database, no Django settings.

    python -m toolhub.audit_file_verify acme-audit.jsonl [--head HASH | --head CHAIN:HASH ...]
        [--public-key KEY | --public-key-file FILE]

Every line's hash is recomputed with toolhub's own functions (``toolhub.audit_hash_core``) and every link
checked: a missing sequence number, lines out of order, an altered line, a chain cut short of the header,
of the signed checkpoint it names or of a head given with ``--head`` (kept independently, e.g. read from
the console when the export was made). Exit 0 when the file verifies, 1 naming each problem (or the file
unreadable), 2 for a malformed argument (a head, a public key, an unreadable key file). Each problem is labelled with
its kind, as ``verify_audit`` labels its own (``toolhub.audit_problem``): ``TAMPERED`` (lines or header altered, cut
or added to) or ``UNVERIFIABLE`` (a header the public key given cannot check: unsigned, HMAC-only, signed by another
key); either fails.

With ``--public-key KEY`` or ``--public-key-file FILE`` (toolhub's export public key, ``manage.py
audit_public_key``) the header must carry toolhub's Ed25519 signature (``toolhub.audit_export_key``): its heads
and its signed checkpoint's heads are then toolhub's word, and a file cut or rewritten fails. The public key checks
and cannot sign, so the auditor needs no secret. Without it, or a head kept apart from the file (``--head``), a
file rewritten whole and consistently verifies; the output says so.

Lines are read strictly: a duplicate key, NaN or Infinity, a number that is not an integer where one is due, a column
that is not text (an id neither text nor null), or a line longer than ``MAX_LINE_CHARS`` is reported, never read one
way here and another way by the next reader.
"""

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from toolhub.audit_export_key import PublicKeyError
from toolhub.audit_hash_core import HASHED_COLUMNS, hash_text, tenant_chains
from toolhub.audit_keyring import ExportKey, load_keys, verified_by
from toolhub.audit_problem import TAMPERED, TrailProblem

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "MAX_LINE_CHARS",
    "MAX_PROBLEMS",
    "ExportFileError",
    "FileVerification",
    "main",
    "read_lines",
    "verify_export_lines",
]

# The same values as ``toolhub.audit_export`` writes (that module needs Django; this one must not).
EXPORT_FORMAT = "toolhub-audit-export"
EXPORT_VERSION = 1

_LINE_KEYS = frozenset({*HASHED_COLUMNS, "hash"})
#: The columns a line holds as text, and the ids it holds as text or null: ``hash_text`` writes any false id (``""``,
#: ``0``, ``false``, ``[]``) as null, so a line is read only as the export writes it, one spelling per hashed value.
_TEXT_COLUMNS = ("event_type", "tool_name", "status", "tenant", "actor", "created_at", "data", "prev_hash", "hash")
_ID_COLUMNS = ("call_id", "run_id")

#: The longest line read (an event's data is at most a few megabytes): a longer one is reported, not held.
MAX_LINE_CHARS = 16 * 1024 * 1024
_READ_CHARS = 1024 * 1024
#: The most problems named one by one; any more are counted (``FileVerification.unlisted``).
MAX_PROBLEMS = 1000
_HASH = re.compile(r"[0-9a-f]{64}")
#: JSON's whitespace: a line of nothing else is blank. Python's ``str.strip`` strips more (no-break and other Unicode
#: spaces, the information separators), which no JSON reader skips: such a line is read as the JSON it is not.
_JSON_BLANK = " \t\r\n"
_NUMBER = re.compile(r"[0-9]+")


class _OverlongLine(str):
    """Stands for a line longer than ``MAX_LINE_CHARS``, skipped unread."""


def read_lines(handle: Any, max_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of a text file, never holding more than ``max_chars`` of one: a longer one is an ``_OverlongLine``."""
    while True:
        line = handle.readline(min(_READ_CHARS, max_chars + 1))
        if not line:
            return
        while not line.endswith("\n") and len(line) <= max_chars:
            more = handle.readline(min(_READ_CHARS, max_chars + 1 - len(line)))
            if not more:
                break
            line += more
        if len(line) > max_chars and not line.endswith("\n"):
            while (rest := handle.readline(_READ_CHARS)) and not rest.endswith("\n"):
                pass
            yield _OverlongLine()
            continue
        yield line


class _Malformed(ValueError):
    """A line that is not strict JSON (duplicate key, NaN or Infinity)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Malformed(f"the key {next(k for k in keys if keys.count(k) > 1)[:40]!r} appears twice")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise _Malformed(f"{name} is not a number an export holds")


def _loads(text: str) -> Any:
    """JSON read strictly: one reading only (no duplicate keys, no NaN or Infinity, no nesting past Python's stack)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except RecursionError:
        raise _Malformed("it is nested deeper than any export writes") from None


def _shown(value: Any, limit: int = 60) -> str:
    """``value`` quoted for a message, cut to ``limit`` characters: no message grows with the file's text."""
    text = repr(value[: limit + 1] if isinstance(value, str) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_head(given: str) -> tuple[int | None, str]:
    """``[CHAIN:]HASH`` as kept apart from the file (any case, spaces around): ``ValueError`` when it is neither."""
    chain_text, _, head_hash = given.strip().rpartition(":")
    head_hash = head_hash.strip().lower()
    if not _HASH.fullmatch(head_hash) or (chain_text and not _NUMBER.fullmatch(chain_text.strip())):
        raise ValueError(f"--head {given[:80]!r}: give HASH or CHAIN:HASH (a hash is 64 hexadecimal digits)")
    return (int(chain_text) if chain_text else None), head_hash


class ExportFileError(ValueError):
    """The file is not an audit export this verifier reads (unreadable, not JSON, another format or version)."""


@dataclass
class FileVerification:
    """What the file holds and every problem found in it (empty: it verifies), each with its kind.

    ``TAMPERED``: the lines or the header were altered, cut or added to. ``UNVERIFIABLE``: the header's signature
    cannot be checked with the key given (``toolhub.audit_problem``, the kinds ``verify_audit`` prints). Either fails.
    """

    tenant: str
    events: int = 0
    chains: int = 0
    problems: list[TrailProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Problems found past the first ``MAX_PROBLEMS``: counted, not held (a file of bad lines stays constant memory).
    unlisted: int = 0
    #: Those counted problems by kind.
    unlisted_kinds: Counter[str] = field(default_factory=Counter)

    def problem(self, text: str, kind: str = TAMPERED) -> None:
        """Record a problem: the first ``MAX_PROBLEMS`` in words, any more as a count."""
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(TrailProblem(text, kind))
        else:
            self.unlisted += 1
            self.unlisted_kinds[kind] += 1


@dataclass
class _Chain:
    chain: int
    first_seq: int
    last_seq: int
    last_hash: str
    #: The seq of each line whose hash a checkpoint or ``--head`` names (only those: constant memory).
    hashes: dict[str, int] = field(default_factory=dict)


def verify_export_lines(
    lines: Iterable[str], heads: Iterable[str] = (), public_key: Ed25519PublicKey | list[ExportKey] | None = None
) -> FileVerification:
    """Verify an export read line by line, in constant memory; ``heads``: ``[CHAIN:]HASH`` kept apart from it.

    ``public_key``: toolhub's export public key, or its keys with the retired ones (``toolhub.audit_keyring``), to
    check the header's signature. Raises ``ExportFileError`` when
    the first line is not this format's header, ``ValueError`` for a malformed head.
    """
    numbered = enumerate(lines, start=1)
    first = next(numbered, None)
    if first is None:
        raise ExportFileError("the file is empty: it holds no export header")
    header = _header(first[1])
    tenant = header["tenant"]
    own = tenant_chains(tenant)
    result = FileVerification(tenant)
    declared = _declared(header, result)
    given_heads = [parse_head(given) for given in heads]
    wanted = {head for _, head in given_heads} | _checkpoint_hashes(header) | _header_head_hashes(header)
    wanted |= {span[2] for span in declared.values() if span[2] is not None}
    chains: dict[int, _Chain] = {}
    current: _Chain | None = None
    for number, text in numbered:
        if not text.strip(_JSON_BLANK) and not isinstance(text, _OverlongLine):
            continue
        event = _event(number, text, result)
        if event is None:
            continue
        chain, seq = event["chain"], event["seq"]
        where = f"chain {chain} seq {seq} (line {number})"
        if chain not in own or event["tenant"] != tenant:
            result.problem(
                f"{where}: an event of tenant {_shown(event['tenant'])} in chain {chain}, in an export of "
                f"{_shown(tenant)}'s own chains: the line or the header's tenant was altered"
            )
            continue
        result.events += 1
        if current is None or chain != current.chain:
            if chain in chains or (current is not None and chain < current.chain):
                result.problem(
                    f"{where}: chain {chain} resumes after chain {current.chain if current else '?'}: "
                    "lines were moved (an export holds each chain once, in chain order)"
                )
                continue
            current = chains[chain] = _Chain(chain, seq, seq - 1, event["prev_hash"])
            _start(current, event, declared.get(chain), where, result)
        _link(current, event, where, result)
        if event["hash"] in wanted:
            current.hashes[event["hash"]] = seq
    result.chains = len(chains)
    _ends(chains, declared, header, result)
    _signature(header, [ExportKey(public_key)] if isinstance(public_key, Ed25519PublicKey) else public_key, result)
    _given_heads(chains, given_heads, result)
    return result


def _header(text: str) -> dict[str, Any]:
    if isinstance(text, _OverlongLine):
        raise ExportFileError(f"line 1 is longer than {MAX_LINE_CHARS} characters: this is not a toolhub audit export")
    try:
        header = _loads(text)
    except _Malformed as exc:
        raise ExportFileError(f"line 1 is not strict JSON ({exc}): the header was altered") from None
    except ValueError:
        raise ExportFileError("line 1 is not JSON: this is not a toolhub audit export") from None
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        raise ExportFileError(f"line 1 is not a {EXPORT_FORMAT} header: this is not a toolhub audit export")
    if header.get("version") != EXPORT_VERSION:
        raise ExportFileError(
            f"the export is format version {_shown(header.get('version'))}; this verifier reads version "
            f"{EXPORT_VERSION} (use the verifier of the toolhub release that wrote it)"
        )
    if not isinstance(header.get("tenant"), str) or not header["tenant"]:
        raise ExportFileError("the header names no tenant: it was altered")
    if not isinstance(header.get("chains"), list) or not isinstance(header.get("heads"), dict):
        raise ExportFileError("the header lists no chains or heads: it was altered")
    return header


def _checkpoint_hashes(header: dict[str, Any]) -> set[str]:
    checkpoint = header.get("checkpoint")
    heads = checkpoint.get("heads") if isinstance(checkpoint, dict) else None
    if not isinstance(heads, dict):
        return set()
    return {head["hash"] for head in heads.values() if isinstance(head, dict) and isinstance(head.get("hash"), str)}


def _header_head_hashes(header: dict[str, Any]) -> set[str]:
    """The hashes of the heads the header names: each must be the line at its chain's declared end."""
    return {
        head["hash"]
        for head in header["heads"].values()
        if isinstance(head, dict) and isinstance(head.get("hash"), str)
    }


#: A chain's span as the header states it: first seq, last seq, and the hash of the event at the last (``to_hash``;
#: None in a file exported before the header named it).
_Span = tuple[int, int, str | None]


def _declared(header: dict[str, Any], result: FileVerification) -> dict[int, _Span]:
    """Each chain's seq span as the header states it, with the hash it ends at."""
    spans: dict[int, _Span] = {}
    for entry in header["chains"]:
        numbers: list[Any] = (
            [entry.get(name) for name in ("chain", "from_seq", "to_seq")] if isinstance(entry, dict) else []
        )
        to_hash = entry.get("to_hash") if isinstance(entry, dict) else None
        if (
            len(numbers) != 3
            or not all(_is_int(number) for number in numbers)
            or numbers[0] in spans
            or not (to_hash is None or (isinstance(to_hash, str) and _HASH.fullmatch(to_hash)))
        ):
            result.problem(f"the header's chain entry {str(entry)[:80]} is malformed: the header was altered")
            continue
        spans[numbers[0]] = (numbers[1], numbers[2], to_hash)
    return spans


def _event(number: int, text: str, result: FileVerification) -> dict[str, Any] | None:
    if isinstance(text, _OverlongLine):
        result.problem(f"line {number} is longer than {MAX_LINE_CHARS} characters: it was not read")
        return None
    try:
        event = _loads(text)
    except _Malformed as exc:
        result.problem(f"line {number} is not strict JSON ({exc}): it was altered")
        return None
    except ValueError:
        result.problem(f"line {number} is not JSON: it was altered or cut")
        return None
    if (
        not isinstance(event, dict)
        or set(event) != _LINE_KEYS
        or not _is_int(event["chain"])
        or not _is_int(event["seq"])
        or not all(isinstance(event[column], str) for column in _TEXT_COLUMNS)
        or not all(
            event[column] is None or (isinstance(event[column], str) and event[column]) for column in _ID_COLUMNS
        )
    ):
        result.problem(f"line {number} is not an audit event as exported: it was altered")
        return None
    return event


def _start(chain: _Chain, event: dict[str, Any], span: _Span | None, where: str, result: FileVerification) -> None:
    """A chain's first line: where the header says it starts, and what vouches for its previous hash."""
    seq = event["seq"]
    if span is None:
        result.problem(f"{where}: chain {chain.chain} is not among the header's chains: lines were added")
    elif seq != span[0]:
        result.problem(
            f"{where}: chain {chain.chain} starts at seq {seq}, the header says at seq {span[0]}: "
            f"its first lines (seq {span[0]}..{seq - 1}) were removed"
            if seq > span[0]
            else f"{where}: chain {chain.chain} starts before the header's seq {span[0]}: lines were added"
        )
    if seq == 1 and event["prev_hash"] != "":
        result.problem(f"{where}: the first event of a chain has a previous hash: it was altered")
    elif seq > 1:
        result.notes.append(
            f"chain {chain.chain} is verified from seq {seq}: its previous hash {event['prev_hash'][:16]}... is "
            "vouched for only by an export or verification of the events before it"
        )


def _link(chain: _Chain, event: dict[str, Any], where: str, result: FileVerification) -> None:
    """One line after the previous of its chain: the next seq, linked to it, hashing to what it says."""
    seq, expected = event["seq"], chain.last_seq + 1
    if seq > expected:
        result.problem(
            f"{where}: seq {expected}..{seq - 1} of chain {chain.chain} are missing before it: lines were deleted"
        )
    elif seq < expected:
        result.problem(
            f"{where}: comes after seq {chain.last_seq} of chain {chain.chain}: lines were reordered or repeated"
        )
    elif event["prev_hash"] != chain.last_hash:
        result.problem(
            f"{where}: its previous hash is not the hash of seq {seq - 1} before it: a line was altered or replaced"
        )
    try:
        recomputed = hash_text(*(event[column] for column in HASHED_COLUMNS))
    except (TypeError, ValueError):
        recomputed = ""
    if recomputed != event["hash"]:
        result.problem(f"{where}: its hash does not match its content: the line was altered")
    if seq >= expected:
        chain.last_seq, chain.last_hash = seq, event["hash"]


def _ends(
    chains: dict[int, _Chain], declared: dict[int, _Span], header: dict[str, Any], result: FileVerification
) -> None:
    """Each chain's end against the header's span, the hash it ends at and head, and the signed checkpoint's heads."""
    for number, (first, last, to_hash) in sorted(declared.items()):
        chain = chains.get(number)
        if chain is None:
            result.problem(
                f"chain {number}: the header lists seq {first}..{last} but the file holds none of its lines: removed"
            )
            continue
        if chain.last_seq < last:
            result.problem(
                f"chain {number} ends at seq {chain.last_seq}, the header says at seq {last}: "
                f"its last lines (seq {chain.last_seq + 1}..{last}) were cut"
            )
        elif chain.last_seq > last:
            result.problem(
                f"chain {number} goes on to seq {chain.last_seq}, the header says it ends at seq {last}: "
                f"lines (seq {last + 1}..{chain.last_seq}) were added"
            )
        head = header["heads"].get(str(number))
        if isinstance(head, dict) and head.get("seq") == last and chain.hashes.get(str(head.get("hash"))) != last:
            result.problem(
                f"chain {number} seq {last}: not the head the header names: the line or the header was altered"
            )
        elif to_hash is not None and chain.hashes.get(to_hash) != last:
            result.problem(
                f"chain {number} seq {last}: not the event the header says its span ends at: the lines were rewritten"
            )
        elif to_hash is None and not (isinstance(head, dict) and head.get("seq") == last):
            result.notes.append(
                f"chain {number}: the header names no hash for seq {last}, where its span ends short of the head "
                "(an export from before spans named their end): its lines are the file's own word, signed or not"
            )
    checkpoint = header.get("checkpoint")
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("heads"), dict):
        source = f"signed checkpoint #{_shown(checkpoint.get('seq'), 24)}"
        for number, head in sorted(checkpoint["heads"].items()):
            if not (
                _NUMBER.fullmatch(number)
                and isinstance(head, dict)
                and _is_int(head.get("seq"))
                and isinstance(head.get("hash"), str)
            ):
                result.problem(f"the header's checkpoint entry {number[:40]!r} is malformed: the header was altered")
                continue
            chain, named_seq = chains.get(int(number)), head["seq"]
            if chain is None:
                result.problem(
                    f"chain {number}: {source} names its seq {named_seq}, but the file holds none of its lines: "
                    "the chain was removed"
                )
                continue
            if chain.last_seq < named_seq:
                result.problem(
                    f"chain {number} ends at seq {chain.last_seq}, short of seq {named_seq} named by {source}: "
                    "its tail was cut"
                )
            elif chain.hashes.get(head["hash"]) != named_seq:
                result.problem(f"chain {number} seq {named_seq}: not the event {source} names: the chain was rewritten")
        if checkpoint["heads"]:
            result.notes.append(f"compared with the heads of {source} as the header names them")


def _signature(header: dict[str, Any], keys: list[ExportKey] | None, result: FileVerification) -> None:
    """With public keys, the header must be signed by one valid for it; without, say that nothing was checked."""
    if keys is None:
        result.notes.append(
            "signatures were NOT checked (no --public-key): the header and its checkpoint heads are the file's own "
            "word, and a file rewritten whole and consistently would verify too"
        )
        return
    key, problem = verified_by(keys, header)
    if key is None:
        if problem is not None:
            result.problem(problem.text, problem.kind)
        return
    checkpoint = header.get("checkpoint")
    # Quoted cut short: a retired key's holder signs what they like up to its retirement, any length.
    vouched = (
        f"and checkpoint #{_shown(checkpoint.get('seq'), 24)} of {_shown(checkpoint.get('created_at'))} named the "
        "heads it lists"
        if isinstance(checkpoint, dict)
        else "(no signed checkpoint covered the exported range)"
    )
    result.notes.append(
        f"the header is signed by the {'public' if key.through is None else 'retired'} key given ({key.fingerprint}"
        f"{'' if key.through is None else f', valid for checkpoints up to #{key.through}'}): toolhub "
        f"exported these chains up to these heads at {_shown(header.get('exported_at'))}, {vouched}"
    )


def _given_heads(chains: dict[int, _Chain], heads: Iterable[tuple[int | None, str]], result: FileVerification) -> None:
    """Each ``--head`` must be in the file: a head kept apart from it that is missing means its tail was cut."""
    for chain_number, head_hash in heads:
        candidates = list(chains.values())
        if chain_number is not None:
            candidates = [chains[chain_number]] if chain_number in chains else []
        where = f"chain {chain_number}" if chain_number is not None else "any chain of the file"
        if not any(head_hash in chain.hashes for chain in candidates):
            result.problem(
                f"the expected head {head_hash[:16]}... is in {where} nowhere: the tail that led to it was cut, "
                "or the file was rewritten"
            )
            continue
        result.notes.append(f"the expected head {head_hash[:16]}... is in the file")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolhub.audit_file_verify", description="Verify an exported toolhub audit trail offline."
    )
    parser.add_argument("file", help="a JSON Lines file written by manage.py audit_export or the console")
    parser.add_argument(
        "--head",
        action="append",
        default=[],
        help="a head kept apart from the file, HASH or CHAIN:HASH: the file must reach it (catches a cut tail)",
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument(
        "--public-key",
        metavar="KEY",
        help="toolhub's export public key (base64 or hex, from manage.py audit_public_key): the header's signature "
        "is checked",
    )
    keys.add_argument(
        "--public-key-file",
        metavar="FILE",
        help="a file holding that key (audit_public_key's output), or the current and retired keys (its --all output)",
    )
    # Replaced by --public-key: the checkpoint key it read would let the auditor sign, and had to leave the platform.
    keys.add_argument("--key-env", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.key_env is not None:
        parser.error(
            "--key-env is no longer read: export headers are signed with a public key now, and the checkpoint key "
            "stays on the platform. Get the public key with manage.py audit_public_key and pass --public-key KEY"
        )
    for given in options.head:
        try:
            parse_head(given)
        except ValueError as exc:
            parser.error(str(exc))
    try:
        public_key = load_keys(options.public_key, options.public_key_file)
    except PublicKeyError as exc:
        parser.error(str(exc))
    try:
        with open(options.file, encoding="utf-8") as handle:
            result = verify_export_lines(read_lines(handle), options.head, public_key)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"ERROR: cannot read {options.file}: {exc}", file=sys.stderr)
        return 1
    except ExportFileError as exc:
        print(f"ERROR: {options.file}: {exc}", file=sys.stderr)
        return 1
    # Each labelled with its kind, as verify_audit labels its own: what could not be checked is not called tampered.
    for problem in result.problems:
        print(f"{problem.kind} {problem}", file=sys.stderr)
    for kind, count in sorted(result.unlisted_kinds.items()):
        print(f"{kind} ... and {count} more problem(s), not listed", file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}")
    if result.problems:
        total = len(result.problems) + result.unlisted
        print(f"{options.file} does NOT verify: {total} problem(s)", file=sys.stderr)
        return 1
    print(
        f"{options.file} verifies: {result.events} events in {result.chains} chain(s) of tenant {result.tenant[:120]}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
