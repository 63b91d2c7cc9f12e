"""Progress of long tools: an injected emitter whose updates are stored on the call, never sent to the model."""

import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import Any

from toolhub.storable import json_storage_problem, storable_text

__all__ = ["Progress"]

_MESSAGE_LIMIT = 500


class Progress:
    """Reports how far a long-running tool got.

    Declare a parameter of this type and toolhub injects one (it is not in the schema)::

        @tool(timeout=600)
        def reindex(index: str, progress: Progress) -> str:
            for done, batch in enumerate(batches, 1):
                ...
                progress.update(f"batch {done}", current=done, total=len(batches))

    On a worker every update is stored on the ``ToolCall`` (at most ``keep`` of the newest, written at
    most every ``min_interval`` seconds plus once at the end) and shown to operators and API clients.
    Updates never reach the model; on a worker, the tool's secrets are replaced in their messages.
    """

    def __init__(
        self,
        sink: Callable[[list[dict[str, Any]]], None] | None = None,
        *,
        min_interval: float = 0.0,
        keep: int = 50,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self._sink = sink
        self._redact = redact
        self._min_interval = min_interval
        self._keep = max(1, keep)
        self._updates: list[dict[str, Any]] = []
        self._last_write = 0.0
        self._dirty = False
        self._lock = threading.Lock()

    def update(self, message: str = "", *, current: float | None = None, total: float | None = None) -> None:
        """Record that the tool got this far: a short message and/or ``current`` out of ``total``.

        The numbers must be storable (a NaN or an infinity is refused like a negative one); the message is
        stored with NUL characters and lone surrogates written out: the write happens in the tool's own
        run, where a value the database refuses failed the tool with a database error.
        """
        problem = json_storage_problem({"current": current, "total": total})
        if problem:
            raise ValueError(f"Progress {problem}.")
        if total is not None and total <= 0:
            raise ValueError("Progress total must be positive.")
        if current is not None and current < 0:
            raise ValueError("Progress current must not be negative.")
        entry: dict[str, Any] = {"at": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")}
        if message:
            # Redacted before it is cut, so a cut cannot leave part of a secret behind.
            text = self._redact(str(message)) if self._redact else str(message)
            entry["message"] = storable_text(text[:_MESSAGE_LIMIT])
        if current is not None:
            entry["current"] = current
        if total is not None:
            entry["total"] = total
        if current is not None and total:
            entry["fraction"] = round(min(max(current / total, 0.0), 1.0), 4)
        with self._lock:
            self._updates = [*self._updates, entry][-self._keep :]
            self._dirty = True
            due = time.monotonic() - self._last_write >= self._min_interval
        if due:
            self.flush()

    __call__ = update

    @property
    def updates(self) -> list[dict[str, Any]]:
        """Every update kept so far, oldest first."""
        return list(self._updates)

    @property
    def latest(self) -> dict[str, Any] | None:
        return self._updates[-1] if self._updates else None

    def flush(self) -> None:
        """Write pending updates to the sink now (toolhub calls this when the tool returns)."""
        with self._lock:
            if not self._dirty or self._sink is None:
                return
            updates = list(self._updates)
            self._dirty = False
            self._last_write = time.monotonic()
        self._sink(updates)
