"""Secrets never leave a tool: the value of every ``Secret`` preset is replaced by ``[secret]`` in what it outputs.

So is the value of each of the call's withheld arguments (``Tool.withheld``: its ``sensitive`` ones and, for a tool
that has any, those under a name it does not declare; shown nowhere else either), when the tool repeats it. The
worker builds one ``SecretScrubber`` per call from these values and passes every way out of the tool through it,
where that output enters the pipeline (``toolhub.execution``):

- the result, nested values and dictionary keys included, ``ToolResult.text`` and ``ToolResult.error``;
- an exception: the model's message and the traceback kept for auditors;
- progress messages;
- artifacts: a *text* artifact (a textual media type, e.g. ``text/*`` or JSON) is scrubbed in its declared
  ``charset`` (UTF-8 by default) and hashed after scrubbing; a *binary* one holding the secret's bytes is
  refused (the call fails, nothing is stored), because replacing bytes inside a binary format corrupts it
  and cannot be trusted to remove every copy, and so is a text one that still holds them (an unknown
  charset, or the secret in another encoding than the declared one);
- log records created while the call runs, whatever the logger (the tool's own included) and whatever
  thread (one the tool starts without its context is scrubbed of every running call's secrets, and of those
  of the calls that ended in the last ``LINGER_SECONDS``: it may outlive its call, as when the call timed out):
  a log record factory rewrites their message, and formats their traceback to scrubbed text (dropping the
  exception object, whose frames hold the secret); the attributes given with ``extra=`` are scrubbed too.

Audit events, the stored call and what the model is told are built from these scrubbed values only.
Besides the plain value, the forms an exception or a log line typically carries are matched: ``repr``
escapes, JSON, URL encoding, a bytes ``repr`` and the value's own base64. A secret transformed otherwise
(hashed, base64 together with other text as in a Basic header, compressed into a binary artifact) is not
recognisable: tools must still not output secrets.
Values shorter than ``MIN_SECRET_LENGTH`` characters are not scrubbed (every occurrence of a common
short string would be), so secrets must be at least that long.
"""

import codecs
import collections
import contextlib
import contextvars
import logging
import math
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from toolhub.exceptions import ToolhubError
from toolhub.tools.presets import Secret
from toolhub.tools.secret_values import MIN_SECRET_LENGTH, secret_texts, sensitive_values, text_forms

if TYPE_CHECKING:
    from toolhub.tools.definition import Tool

__all__ = [
    "SECRET_MARKER",
    "MIN_SECRET_LENGTH",
    "NO_SECRETS",
    "SecretScrubber",
    "is_text_media_type",
    "secret_texts",
    "sensitive_values",
]

#: What a secret is replaced by, wherever it would have been stored or shown.
SECRET_MARKER = "[secret]"

_TEXT_MEDIA_TYPES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/jsonl",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/csv",
        "application/javascript",
        "application/sql",
    }
)


def is_text_media_type(media_type: str) -> bool:
    """Whether an artifact of this media type is text (scrubbed) rather than binary (refused if it holds a secret)."""
    base = media_type.split(";", 1)[0].strip().lower()
    return base.startswith("text/") or base in _TEXT_MEDIA_TYPES or base.endswith(("+json", "+xml"))


class SecretScrubber:
    """Replaces a set of secret values, and their simple encodings, by ``SECRET_MARKER``."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = tuple(dict.fromkeys(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH))
        forms = {form for value in self.values for form in text_forms(value)}
        # Longest first, so a form that contains another is replaced whole.
        self._forms = tuple(sorted(forms, key=len, reverse=True))
        raw = {form.encode("utf-8") for form in forms}
        raw |= {value.encode(codec) for value in self.values for codec in ("utf-16-le", "utf-16-be")}
        self._raw = tuple(raw)

    @classmethod
    def for_presets(cls, presets: Mapping[str, Any]) -> "SecretScrubber":
        """A scrubber for the secrets a tool with these presets receives now (unset ones are skipped)."""
        values: list[str] = []
        for preset in presets.values():
            if isinstance(preset, Secret):
                value = preset.resolve()
                if value is not None:
                    values.extend(secret_texts(value))
        return cls(values)

    @classmethod
    def for_arguments(cls, tool: "Tool", arguments: Mapping[str, Any]) -> "SecretScrubber":
        """A scrubber for the values of ``arguments`` that are never kept or shown as sent (``Tool.withheld``).

        The sensitive names and, for a tool that has any, every name it does not declare (a misspelt ``PIN``
        carries the PIN): one rule for what is withheld from the stored arguments and what is scrubbed from
        anything that repeats them (a result, a refusal, an approval reason).
        """
        return cls(sensitive_values(arguments, tool.withheld(arguments), declared=tool.declared_names))

    @classmethod
    def for_call(cls, tool: "Tool", arguments: Mapping[str, Any]) -> "SecretScrubber":
        """A scrubber for one call of ``tool``: its secrets, and the values of its withheld arguments.

        What the model or a client sent as a sensitive argument is shown nowhere (``redact``); a tool that
        repeats it in its result, an error or a log line must not show it there either.
        """
        presets = tool.presets
        if not presets and not tool.withheld(arguments):
            return NO_SECRETS  # nothing to scrub: no preset, no withheld argument (a scrubber is never changed)
        secrets = cls.for_presets(presets)
        withheld = cls.for_arguments(tool, arguments)
        return cls((*secrets.values, *withheld.values)) if withheld else secrets

    @classmethod
    def merged(cls, scrubbers: Iterable["SecretScrubber"]) -> "SecretScrubber":
        """One scrubber for the values of all of ``scrubbers``, from their forms as built (none built again)."""
        merged = cls(())
        scrubbers = list(scrubbers)
        merged.values = tuple(dict.fromkeys(value for scrubber in scrubbers for value in scrubber.values))
        forms = {form for scrubber in scrubbers for form in scrubber._forms}
        merged._forms = tuple(sorted(forms, key=len, reverse=True))
        merged._raw = tuple({raw for scrubber in scrubbers for raw in scrubber._raw})
        return merged

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, SECRET_MARKER)
        return text

    def value(self, data: Any) -> Any:
        """JSON data with every secret replaced, in strings, keys and numbers (a numeric secret) alike."""
        if not self._forms:
            return data
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, bool) or data is None:
            return data
        if isinstance(data, int | float):
            shown = str(data)
            return SECRET_MARKER if self.text(shown) != shown else data
        if isinstance(data, Mapping):
            return {(self.text(k) if isinstance(k, str) else k): self.value(v) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return [self.value(item) for item in data]
        return data

    def holds_secret(self, content: bytes) -> bool:
        """Whether binary content holds a secret's bytes (UTF-8, UTF-16, or one of its text encodings)."""
        return any(raw in content for raw in self._raw)

    def artifact(self, content: bytes, media_type: str) -> bytes | None:
        """Text content with its secrets replaced; ``None`` for content that still holds one.

        Text is read in its declared ``charset`` (UTF-8 when none is declared: ``text/plain; charset=utf-16``
        holds the value as UTF-16 code units, which no UTF-8 form matches). What is left is checked as binary
        content is: text whose charset is unknown, that does not decode in it, or that holds the secret in
        another encoding than the one it declares is refused rather than stored with it.
        """
        if not self._forms:
            return content
        if not is_text_media_type(media_type):
            return None if self.holds_secret(content) else content
        scrubbed, marker = self._scrubbed_text(content, _charset(media_type))
        # What is left once the markers are set aside must hold no secret (a secret may be part of the marker).
        return None if self.holds_secret(scrubbed.replace(marker, b"")) else scrubbed

    def _scrubbed_text(self, content: bytes, charset: str) -> tuple[bytes, bytes]:
        """``content`` decoded in ``charset``, scrubbed and encoded back, and the marker as encoded there.

        Unchanged when that cannot be done (an unknown charset, bytes that are not in it).
        """
        try:
            codec = codecs.lookup(charset).name
        except LookupError:
            return content, SECRET_MARKER.encode()
        if codec in ("utf-8", "ascii"):
            # surrogateescape keeps bytes that are not UTF-8 exactly as they were.
            text = self.text(content.decode("utf-8", "surrogateescape"))
            return text.encode("utf-8", "surrogateescape"), SECRET_MARKER.encode()
        try:
            # The marker encoded alone carries the codec's byte order mark, if it writes one; within text it has none.
            marker = SECRET_MARKER.encode(codec).removeprefix("".encode(codec))
            decoded = content.decode(codec)
            scrubbed = self.text(decoded)
            # Encoding again may change the bytes of text that had nothing to scrub (a BOM-less big-endian UTF-16
            # read as little-endian, then written with a BOM): such text is kept byte for byte.
            return (content if scrubbed == decoded else scrubbed.encode(codec)), marker
        except (UnicodeError, ValueError):
            return content, SECRET_MARKER.encode()

    def log_record(self, record: logging.LogRecord, *, only_when_found: bool = False) -> None:
        """Rewrite a log record in place: its message, traceback and stack without the secrets.

        ``only_when_found``: leave the message of a record that shows none of them as it is (its arguments kept
        for handlers): for a thread that may work for no call at all (``_RunningScopes``). Its exception object
        is still replaced by its traceback's text: the frames' local variables may hold a secret no text shows.
        """
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not hide what it carried
            message = f"{record.msg!r} % {record.args!r}"
        formatted = None
        if record.exc_info and record.exc_info[0] is not None:
            formatted = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if only_when_found and not any(
            self.text(text) != text for text in (message, formatted, record.exc_text, record.stack_info) if text
        ):
            if formatted is not None:
                record.exc_text, record.exc_info = formatted, None
            return
        record.msg, record.args = self.text(message), ()
        if record.exc_info:
            if formatted is not None:
                record.exc_text = self.text(formatted)
            # The exception object (and its frames' local variables) would reach handlers that read exc_info.
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = self.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self.text(record.stack_info)

    def log_extra(self, record: logging.LogRecord, extra: Mapping[str, object]) -> None:
        """Rewrite the attributes a record was given with ``extra=`` that show a secret; the others are left.

        JSON log formatters and error trackers ship them with the message.
        """
        for name in extra:
            value = record.__dict__.get(name)
            scrubbed, changed = self._anything(value)
            if changed:
                record.__dict__[name] = scrubbed

    def _anything(self, data: Any, depth: int = 0) -> tuple[Any, bool]:
        """Any data with its secrets replaced, and whether one was.

        Containers item by item, JSON values as ``value`` does, another object (or a container too deep) by its
        scrubbed ``repr`` when that shows one.
        """
        if data is None or isinstance(data, str | bool | int | float):
            scrubbed = self.value(data)
            return scrubbed, scrubbed is not data and scrubbed != data
        if depth < 20 and isinstance(data, Mapping):
            items = [(self._anything(k, depth + 1), self._anything(v, depth + 1)) for k, v in data.items()]
            if any(key[1] or value[1] for key, value in items):
                return {key[0]: value[0] for key, value in items}, True
            return data, False
        if depth < 20 and isinstance(data, list | tuple | set | frozenset):
            scrubbed_items = [self._anything(item, depth + 1) for item in data]
            if any(changed for _, changed in scrubbed_items):
                return [item for item, _ in scrubbed_items], True
            return data, False
        try:
            shown = [repr(data), str(data)]
        except Exception:  # noqa: BLE001 - an object that cannot be shown shows no secret to a handler either
            return data, False
        if any(self.text(text) != text for text in shown):
            return self.text(shown[0]), True
        return data, False

    @contextlib.contextmanager
    def scope(self) -> Iterator["SecretScrubber"]:
        """While the block runs, every log record created is scrubbed, in this thread or context and beyond.

        A thread with no scrubber of its own (one the tool starts without copying its context: a
        ``ThreadPoolExecutor``, ``loop.run_in_executor``) scrubs with every scope active in the process.

        An exception escaping the block whose traceback would show a secret is replaced by one that
        carries the scrubbed traceback, so whoever logs it (Celery) logs no secret.
        """
        outer = _active.get()
        active = SecretScrubber((*outer.values, *self.values)) if outer else self
        if not active:
            yield self
            return
        _install_record_factory()
        token = _active.set(active)
        entry = _running.enter(active)
        try:
            yield self
        except Exception as exc:
            shown = "".join(traceback.format_exception(exc))
            scrubbed = active.text(shown)
            if scrubbed != shown:
                raise ToolhubError(
                    f"An error occurred while a call holding secrets ran (scrubbed):\n{scrubbed}"
                ) from None
            raise
        finally:
            _running.leave(entry)
            _active.reset(token)


#: A scrubber that changes nothing (a tool without secrets).
NO_SECRETS = SecretScrubber(())

_active: contextvars.ContextVar[SecretScrubber | None] = contextvars.ContextVar("toolhub_secrets", default=None)
_factory_lock = threading.Lock()


class _RunningScopes:
    """The scrubbers of every scope active in the process, for log records created outside any call's context.

    A thread the tool starts does not inherit the context variable, so which call it works for is unknown:
    its records are scrubbed with the secrets of every call running now, and of every call that ended less
    than ``linger`` seconds ago (the ``keep`` latest): such a thread may outlive its call (the call timed out
    while its SDK's pool thread still waits for an answer it will log). That only ever redacts more (another
    tenant's secret is replaced, never shown), and the work per record is bounded by ``keep``. The union is built
    when first read after a change, not per record; records read it without the lock while nothing changed.
    """

    def __init__(self, linger: float, keep: int) -> None:
        self.linger, self.keep = linger, keep
        self._lock = threading.Lock()
        self._scrubbers: dict[object, SecretScrubber] = {}
        self._left: collections.deque[tuple[float, SecretScrubber]] = collections.deque()  # oldest first
        self._next_expiry = math.inf  # the oldest left scope's, read without the lock
        self._union: SecretScrubber | None = None
        self._stale = False

    def enter(self, scrubber: SecretScrubber) -> object:
        entry = object()
        with self._lock:
            self._scrubbers[entry] = scrubber
            self._stale = True
        return entry

    def leave(self, entry: object) -> None:
        with self._lock:
            scrubber = self._scrubbers.pop(entry, None)
            if scrubber is not None:
                self._left.append((time.monotonic() + self.linger, scrubber))
                while len(self._left) > self.keep:
                    self._left.popleft()
                self._next_expiry = self._left[0][0]
            self._stale = True

    def union(self) -> SecretScrubber | None:
        """Every running or lingering scope's secrets together; ``None`` when there is none."""
        if self._stale or self._next_expiry <= time.monotonic():
            with self._lock:
                self._forget_expired()
                if self._stale:
                    self._rebuild()
        return self._union

    def _forget_expired(self) -> None:
        now = time.monotonic()
        while self._left and self._left[0][0] <= now:
            self._left.popleft()
            self._stale = True
        self._next_expiry = self._left[0][0] if self._left else math.inf

    def _rebuild(self) -> None:
        scrubbers = [*self._scrubbers.values(), *(scrubber for _, scrubber in self._left)]
        self._union = SecretScrubber.merged(scrubbers) if scrubbers else None
        self._stale = False


#: Seconds a scope's secrets still scrub the records of threads without a call's context after it ended, and how
#: many ended scopes are kept so at most (the latest).
LINGER_SECONDS = 600.0
LINGER_SCOPES = 256

_running = _RunningScopes(LINGER_SECONDS, LINGER_SCOPES)


def _charset(media_type: str) -> str:
    """The ``charset`` parameter of a media type (``text/plain; charset="utf-16"``), UTF-8 when it has none."""
    for parameter in media_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"'):
            return value.strip().strip('"')
    return "utf-8"


def _install_record_factory() -> None:
    """Wrap the log record factory and ``Logger.makeRecord`` once per process (again if someone replaced one since).

    ``makeRecord`` sets a record's ``extra=`` attributes after the factory made it: they are scrubbed there.
    """
    with _factory_lock:
        current = logging.getLogRecordFactory()
        if not getattr(current, "_toolhub_scrubs_secrets", False):
            logging.setLogRecordFactory(_scrubbing_factory(current))
        if not getattr(logging.Logger.makeRecord, "_toolhub_scrubs_secrets", False):
            logging.Logger.makeRecord = _scrubbing_make_record(logging.Logger.makeRecord)  # type: ignore[method-assign]


def _scrubber_here() -> SecretScrubber | None:
    """The scrubber of a record created now: the call's, else (a thread without one) every running call's."""
    return _active.get() or _running.union()


def _scrubbing_factory(previous: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        # A call's own context knows its secrets; a thread without one is scrubbed of every running call's, its
        # record left whole when it shows none (it may work for no call at all).
        scrubber = _active.get()
        if scrubber:
            scrubber.log_record(record)
        else:
            union = _running.union()
            if union:
                union.log_record(record, only_when_found=True)
        return record

    factory._toolhub_scrubs_secrets = True  # type: ignore[attr-defined]
    return factory


def _scrubbing_make_record(previous: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def make_record(
        self: logging.Logger,
        name: str,
        level: int,
        fn: str,
        lno: int,
        msg: object,
        args: Any,
        exc_info: Any,
        func: str | None = None,
        extra: Mapping[str, object] | None = None,
        sinfo: str | None = None,
    ) -> logging.LogRecord:
        record = previous(self, name, level, fn, lno, msg, args, exc_info, func, extra, sinfo)
        scrubber = _scrubber_here() if extra else None
        if scrubber:
            scrubber.log_extra(record, extra or {})
        return record

    make_record._toolhub_scrubs_secrets = True  # type: ignore[attr-defined]
    return make_record
