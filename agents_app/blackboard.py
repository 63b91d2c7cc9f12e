"""A run's blackboard: named objects (artifacts, subagent answers, values agentic tools put) the model can read back.

Embabel's blackboard, kept in the database so a resumed run sees the same objects. Entries belong to
one run and its tenant; a subagent's run also reads its ancestors' entries (a derived blackboard), and
its own entries are copied to its parent when it ends. Every entry is bounded (``MAX_VALUE_BYTES``,
``MAX_ENTRIES_PER_RUN``) and stored redacted: sensitive keys replaced, artifacts as the worker stored
them (secrets already scrubbed).

Writes: ``blackboard_put``, ``blackboard_capture_calls`` (the loop, when a turn's calls settled),
``blackboard_copy_to_parent`` (a child run ending). Reads: ``blackboard_entries`` and the lookups below.
"""

import json
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from agents_app.budgets import MAX_SUBAGENT_DEPTH
from agents_app.models import AgentRun, BlackboardEntry
from toolhub.audit import REDACTED
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolhubError
from toolhub.json_intake import json_loads_checked
from toolhub.models import CallStatus, ToolCall, ToolCallArtifact
from toolhub.storable import json_storage_problem

__all__ = [
    "BlackboardError",
    "MAX_ENTRIES_PER_RUN",
    "MAX_VALUE_BYTES",
    "blackboard_put",
    "blackboard_capture_calls",
    "blackboard_copy_to_parent",
    "blackboard_entries",
    "blackboard_headers",
    "blackboard_entry",
    "blackboard_last",
    "blackboard_count",
    "kind_matches",
    "entry_summary",
]

logger = logging.getLogger(__name__)

#: Most entries one run's blackboard holds; a put beyond is refused.
MAX_ENTRIES_PER_RUN = 200
#: Largest value, as JSON, an entry keeps; a larger artifact is kept as a reference to its call's artifact.
MAX_VALUE_BYTES = 64 * 1024
MAX_NAME_LENGTH = 200


class BlackboardError(ToolhubError):
    """A value that cannot go on the blackboard (too large, not JSON, a full board, no such run)."""


def blackboard_put(
    run: AgentRun | uuid.UUID | str,
    name: str,
    value: Any,
    *,
    kind: str,
    produced_by_call: ToolCall | uuid.UUID | str | None = None,
    sensitive: Iterable[str] = (),
) -> BlackboardEntry:
    """Put ``value`` on the run's blackboard as ``name`` (a later put of the same name wins for ``get``).

    ``kind`` is the object's type (``blackboard_last`` and ``blackboard_count`` match it); values of
    ``sensitive`` keys (top level of a mapping) are replaced before anything is stored.
    """
    row = _run_row(run)
    entry = _entry(row, name, value, kind=kind, produced_by_call=produced_by_call, sensitive=sensitive)
    if not _stored(row, [entry]):
        raise BlackboardError(
            f"The run's blackboard is full ({MAX_ENTRIES_PER_RUN} entries); {entry.name!r} was not put."
        )
    return entry


def _entry(
    row: AgentRun,
    name: str,
    value: Any,
    *,
    kind: str,
    produced_by_call: ToolCall | uuid.UUID | str | None,
    sensitive: Iterable[str] = (),
) -> BlackboardEntry:
    """The entry ``blackboard_put`` stores (not saved), or why it cannot be one (``BlackboardError``)."""
    name, kind = _label(name, "name"), _label(kind, "kind")
    value = _redacted(value, frozenset(sensitive))
    try:
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
        size = len(encoded.encode("utf-8"))
        problem = json_storage_problem(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise BlackboardError(f"Blackboard value {name!r} is not JSON data ({type(exc).__name__}).") from None
    if problem:
        raise BlackboardError(f"Blackboard value {name!r} cannot be stored as JSON: {problem}.")
    if size > MAX_VALUE_BYTES:
        raise BlackboardError(f"Blackboard value {name!r} is {size} bytes; at most {MAX_VALUE_BYTES} are kept.")
    call_id = produced_by_call.id if isinstance(produced_by_call, ToolCall) else produced_by_call
    return BlackboardEntry(
        run_id=row.id,
        tenant=row.tenant,
        name=name,
        kind=kind,
        value=value,
        size=size,
        produced_by_call_id=uuid.UUID(str(call_id)) if call_id else None,
    )


def _stored(row: AgentRun, entries: list[BlackboardEntry]) -> list[BlackboardEntry]:
    """Store as many of ``entries`` as the board has room for, in order; return those stored.

    One turn on the board for them all: a turn's artifacts, or a child's entries copied when it ends, cost the
    same few statements however many there are.
    """
    if not entries:
        return []
    with transaction.atomic():
        # Puts to one board take turns on its run's row until their transaction ends: children ending together,
        # or a turn's tools, would each count room for one more and all put. FOR NO KEY UPDATE: the entries'
        # foreign keys and readers do not wait, only other puts and the loop's step (which holds it already).
        list(AgentRun.objects.select_for_update(no_key=True).filter(id=row.id).values_list("id", flat=True))
        room = MAX_ENTRIES_PER_RUN - BlackboardEntry.objects.filter(run_id=row.id).count()
        if room <= 0:
            return []
        return BlackboardEntry.objects.bulk_create(entries[:room])


def blackboard_capture_calls(run: AgentRun, calls: Iterable[ToolCall]) -> list[BlackboardEntry]:
    """Put the artifacts of a turn's succeeded calls on the run's blackboard (kind: the producing tool's name).

    Called by the loop under the run's lock when the turn's results are appended, so the next turn's
    blackboard tools see them. An artifact that cannot be put is logged and skipped: the call's
    outcome stands either way.
    """
    succeeded = {call.id: call for call in calls if call.status == CallStatus.SUCCEEDED}
    if not succeeded:
        return []
    artifacts = list(ToolCallArtifact.objects.filter(call_id__in=list(succeeded)))
    if not artifacts:  # the common case costs one query
        return []
    done = set(
        BlackboardEntry.objects.filter(run_id=run.id, produced_by_call_id__in=list(succeeded)).values_list(
            "produced_by_call_id", flat=True
        )
    )
    entries = []
    for artifact in artifacts:
        if artifact.call_id in done:
            continue
        call = succeeded[artifact.call_id]
        try:
            value = _artifact_value(artifact)
            entries.append(_entry(run, artifact.name, value, kind=call.tool_name, produced_by_call=call.id))
        except BlackboardError as exc:
            logger.warning("run %s: artifact of call %s not put on the blackboard: %s", run.id, call.id, exc)
    return _stored_or_logged(run, entries, "artifacts of its calls")


def blackboard_copy_to_parent(child: AgentRun) -> int:
    """Copy a child run's own entries to its parent's blackboard when the child ends (Embabel's derived board)."""
    if child.parent_run_id is None:
        return 0
    parent = _run_row(child.parent_run_id)
    entries = []
    for entry in BlackboardEntry.objects.filter(run_id=child.id).order_by("created_at", "id"):
        try:
            entries.append(
                _entry(parent, entry.name, entry.value, kind=entry.kind, produced_by_call=entry.produced_by_call_id)
            )
        except BlackboardError as exc:
            logger.warning("run %s: entry %s not copied to the parent run: %s", child.id, entry.pk, exc)
    return len(_stored_or_logged(parent, entries, f"entries of its child run {child.id}"))


def _stored_or_logged(row: AgentRun, entries: list[BlackboardEntry], what: str) -> list[BlackboardEntry]:
    """``_stored``, with a warning naming how many of ``entries`` a full board refused."""
    stored = _stored(row, entries)
    if len(stored) < len(entries):
        logger.warning(
            "run %s: its blackboard is full (%s entries); %s of the %s not put",
            row.id,
            MAX_ENTRIES_PER_RUN,
            len(entries) - len(stored),
            what,
        )
    return stored


def blackboard_entries(run: AgentRun) -> QuerySet[BlackboardEntry]:
    """What the run sees: its own entries and its ancestors' (a subagent reads its parent's board), oldest first.

    Always within the run's tenant: another run's or tenant's entries never show.
    """
    runs = [run.id]
    parent_id, hops = run.parent_run_id, 0
    while parent_id is not None and hops < MAX_SUBAGENT_DEPTH:
        runs.append(parent_id)
        parent_id = (
            AgentRun.objects.filter(id=parent_id, tenant=run.tenant).values_list("parent_run_id", flat=True).first()
        )
        hops += 1
    return BlackboardEntry.objects.filter(run_id__in=runs, tenant=run.tenant).order_by("created_at", "id")


def blackboard_headers(run: AgentRun) -> QuerySet[BlackboardEntry]:
    """``blackboard_entries`` without their values: a value (up to ``MAX_VALUE_BYTES``) is read when it is used.

    Listing, counting and finding an entry read names and kinds only, not every value the run sees (its board and
    its ancestors', ``MAX_ENTRIES_PER_RUN`` each).
    """
    return blackboard_entries(run).defer("value")


def blackboard_entry(run: AgentRun, name: str) -> BlackboardEntry | None:
    """The latest entry called ``name`` the run sees."""
    return blackboard_entries(run).filter(name=name).order_by("-created_at", "-id").first()


def kind_matches(kind: str, wanted: str) -> bool:
    """Embabel's type matching: the exact kind, or its simple name (``Person`` matches ``crm.Person``)."""
    return kind == wanted or kind.rsplit(".", 1)[-1] == wanted


def blackboard_last(run: AgentRun, kind: str) -> BlackboardEntry | None:
    """The latest entry of ``kind`` (exact or simple name) the run sees."""
    matching = [entry for entry in blackboard_headers(run) if kind_matches(entry.kind, kind)]
    return matching[-1] if matching else None


def blackboard_count(run: AgentRun, kind: str) -> int:
    """How many entries of ``kind`` (exact or simple name) the run sees."""
    return sum(1 for entry in blackboard_headers(run) if kind_matches(entry.kind, kind))


def entry_summary(entry: BlackboardEntry, index: int) -> dict[str, Any]:
    """How ``blackboard_list`` shows an entry: its index, name, kind and size, not its value."""
    return {"index": index, "name": entry.name, "kind": entry.kind, "size": entry.size}


def _run_row(run: AgentRun | uuid.UUID | str) -> AgentRun:
    if isinstance(run, AgentRun):
        return run
    try:
        run_id = uuid.UUID(str(run))
    except ValueError:
        raise BlackboardError(f"Unknown run {str(run)[:100]!r}.") from None
    row = AgentRun.objects.filter(id=run_id).first()
    if row is None:
        raise BlackboardError(f"Unknown run {run_id}.")
    return row


def _label(text: Any, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise BlackboardError(f"A blackboard entry needs a {what}, a non-empty string.")
    if len(text) > MAX_NAME_LENGTH or "\x00" in text:
        raise BlackboardError(f"A blackboard {what} has at most {MAX_NAME_LENGTH} characters and no NUL.")
    return text.strip()


def _redacted(value: Any, sensitive: frozenset[str]) -> Any:
    if sensitive and isinstance(value, Mapping):
        return {key: (REDACTED if key in sensitive else item) for key, item in value.items()}
    return value


def _artifact_value(artifact: ToolCallArtifact) -> Any:
    """JSON artifacts as their data, text ones as text, anything else (or too large) as a reference to the call's."""
    reference = {
        "artifact_id": artifact.pk,
        "call_id": str(artifact.call_id),
        "media_type": artifact.media_type,
        "size": artifact.size,
        "sha256": artifact.sha256,
    }
    if artifact.size > MAX_VALUE_BYTES:
        return {**reference, "note": "Too large for the blackboard; the content stays with the call."}
    content = bytes(artifact.content)
    media = artifact.media_type.split(";")[0].strip().lower()
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return {**reference, "note": "Binary content; it stays with the call."}
    if media == "application/json" or media.endswith("+json"):
        try:  # nested too deep for ``json.loads`` (RecursionError), or unstorable: kept as the text it is
            return json_loads_checked(text, max_depth=toolhub_settings().MAX_REQUEST_NESTING)
        except ValueError:
            return text
    if media.startswith("text/") or media in ("application/xml", "application/yaml"):
        return text
    return {**reference, "note": "Binary content; it stays with the call."}
