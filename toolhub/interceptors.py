"""Interceptors: configured functions that see every call before policy and its result after execution.

Configured in ``TOOLHUB["INTERCEPTORS"]``: a list whose entries are a dotted path (to an ``Interceptor``
class, instance or factory) or ``{"class": "<dotted path>", "options": {...}}`` (the class is built with
the options as keyword arguments). The list is resolved once per configuration and kept, like the frozen
tool registry; a bad entry fails loudly at startup (``toolhub.apps``).

Order: ``before`` runs in the listed order, ``after`` in reverse order (the first listed wraps the
others, like a decorator chain). Failure: an interceptor that raises fails the call closed; the model
reads a sanitized message, auditors read the detail. The pipeline audits every refusal, rewrite (as a
diff, sensitive values redacted) and changed result, each naming the interceptor.
"""

import fnmatch
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from toolhub.conf import toolhub_settings
from toolhub.feedback import exception_detail

__all__ = [
    "Interceptor",
    "InterceptedCall",
    "Refuse",
    "BeforeOutcome",
    "InterceptorFailed",
    "configured_interceptors",
    "interceptors_before",
    "interceptors_after",
    "PIIRedaction",
    "ArgumentPolicy",
    "INTERCEPTOR_FAILED_MESSAGE",
]

#: What the model reads when an interceptor raised (the detail is kept for auditors only).
INTERCEPTOR_FAILED_MESSAGE = "A check configured for this tool failed; the call was stopped. Do not retry it unchanged."


@dataclass(frozen=True)
class InterceptedCall:
    """What an interceptor sees of a call: read-only copies; return new values instead of mutating these."""

    tool_name: str
    arguments: Mapping[str, Any]
    tenant: str
    user_id: int | None
    agent_name: str
    context: Mapping[str, Any]


@dataclass(frozen=True)
class Refuse:
    """Returned by ``before``: refuse the call; ``message`` is what the model reads."""

    message: str


class Interceptor:
    """Base class; override ``before`` and/or ``after``. ``name`` names it in the audit (default: the class)."""

    name: str = ""

    def before(self, call: InterceptedCall) -> "Refuse | Mapping[str, Any] | None":
        """``None`` lets the call pass, a ``Refuse`` refuses it, a mapping replaces its arguments."""
        return None

    def after(self, call: InterceptedCall, result: Any) -> Any:
        """Return the result the model reads (``result`` itself when nothing changes)."""
        return result


def _name_of(interceptor: Interceptor) -> str:
    return interceptor.name or type(interceptor).__name__


class InterceptorFailed(Exception):
    """An interceptor raised (or rewrote into invalid arguments); the call fails closed."""

    def __init__(self, name: str, detail: str, versions: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(f"interceptor {name!r} failed")
        self.name = name
        self.detail = detail
        #: every version of the arguments the interceptors saw or returned (the detail may quote any of them)
        self.versions = list(versions)


#: The interceptors built for the settings object last read, with that object (kept, so its id is never reused).
_built: tuple[object, list[Interceptor]] | None = None


def configured_interceptors() -> list[Interceptor]:
    """The interceptors of ``TOOLHUB["INTERCEPTORS"]``, built once per configuration.

    Every call asks for them: the settings object is rebuilt only when ``TOOLHUB`` changes, so it is the key.
    """
    global _built
    current = toolhub_settings()
    if _built is None or _built[0] is not current:
        _built = (current, [_build(entry) for entry in current.INTERCEPTORS or []])
    return _built[1]


def _build(entry: Any) -> Interceptor:
    options: dict[str, Any] = {}
    if isinstance(entry, Mapping):
        path, options = entry.get("class", ""), dict(entry.get("options") or {})
    else:
        path = entry
    if not isinstance(path, str) or not path:
        raise ImproperlyConfigured(
            f"TOOLHUB['INTERCEPTORS'] entry {entry!r}: give a dotted path or {{'class': path, 'options': {{...}}}}."
        )
    try:
        target = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"TOOLHUB['INTERCEPTORS']: cannot import {path!r} ({exc}).") from exc
    built = target(**options) if callable(target) and (options or isinstance(target, type)) else target
    if not isinstance(built, Interceptor):
        raise ImproperlyConfigured(
            f"TOOLHUB['INTERCEPTORS']: {path!r} is not an Interceptor; subclass toolhub.interceptors.Interceptor."
        )
    return built


@dataclass
class BeforeOutcome:
    """What the ``before`` chain made of a call: its final arguments, a refusal, and each rewrite in order."""

    arguments: dict[str, Any]
    refusal: str = ""
    refused_by: str = ""
    #: every version of the arguments the interceptors saw (a refusal may quote a rewritten sensitive value)
    versions: list[dict[str, Any]] = field(default_factory=list)
    #: ``(interceptor name, arguments before, arguments after)`` per rewrite.
    rewrites: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)


def interceptors_before(
    *, call: InterceptedCall, revalidate: Callable[[dict[str, Any]], dict[str, Any]]
) -> BeforeOutcome:
    """Run every ``before`` in order; a rewrite is validated again (``revalidate``) before the next one sees it.

    Raises ``InterceptorFailed`` when one raises, returns something else, or rewrites into invalid arguments.
    """
    arguments = dict(call.arguments)
    outcome = BeforeOutcome(arguments, versions=[arguments])
    for interceptor in configured_interceptors():
        name = _name_of(interceptor)
        seen = InterceptedCall(**{**call.__dict__, "arguments": json.loads(json.dumps(arguments))})
        answer: Any = None
        try:
            answer = interceptor.before(seen)
            if answer is None:
                continue
            if isinstance(answer, Refuse):
                outcome.refusal, outcome.refused_by = str(answer.message), name
                return outcome
            if not isinstance(answer, Mapping):
                raise TypeError(f"before() returned {type(answer).__name__}; expected None, Refuse or a mapping")
            rewritten = revalidate(dict(answer))
        except Exception as exc:  # noqa: BLE001 - any failure stops the call, none lets it through
            returned = [dict(answer)] if isinstance(answer, Mapping) else []
            raise InterceptorFailed(name, exception_detail(exc), [*outcome.versions, *returned]) from exc
        if rewritten != arguments:
            outcome.rewrites.append((name, arguments, rewritten))
            arguments = rewritten
            outcome.versions.append(arguments)
    outcome.arguments = arguments
    return outcome


def interceptors_after(*, call: InterceptedCall, result: Any) -> tuple[Any, list[str]]:
    """Run every ``after`` in reverse order; return the final result and the names of those that changed it."""
    changed: list[str] = []
    for interceptor in reversed(configured_interceptors()):
        name = _name_of(interceptor)
        try:
            replaced = interceptor.after(call, result)
        except Exception as exc:  # noqa: BLE001
            raise InterceptorFailed(name, exception_detail(exc)) from exc
        if replaced != result:
            changed.append(name)
            result = replaced
    return result, changed


# --- PII redaction of results --------------------------------------------------------------------------------

#: An email: a local part, ``@``, dot-separated labels and a top-level domain of letters. ``[L]+@`` tried at every
#: character rescans the rest of a long run of local-part characters each time (quadratic in ``a@a.a.a...``),
#: so a search starts a local part only where a run of them starts (``_EMAIL``), and ``_redact_emails`` tries
#: the one other start a match can have, where the previous match ended, anchored (``_EMAIL_HERE``). Possessive
#: runs give back nothing that could help: what must follow each (``@`` after the local part, ``.`` after a label)
#: is a character it cannot hold.
_EMAIL_LOCAL = r"[A-Za-z0-9._%+-]"
_EMAIL_REST = _EMAIL_LOCAL + r"++@[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)*\.[A-Za-z]{2,}"
_EMAIL = re.compile(rf"(?<!{_EMAIL_LOCAL}){_EMAIL_REST}")
_EMAIL_HERE = re.compile(_EMAIL_REST)
_CARD = re.compile(r"(?<![\d\w])\d(?:[ -]?\d){12,18}(?![\d\w])")
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]?\d{2,4}){1,4}(?![\w])")
PII_KINDS = ("email", "card", "phone")


def _redact_emails(text: str, replacement: str) -> str:
    """Replace the emails in ``text`` as ``_EMAIL_HERE.sub`` would, reading each character a bounded number of times.

    ``replacement`` is taken literally, like the card and phone ones (``re.sub`` would expand backslashes).
    """
    parts: list[str] = []
    position = 0
    while found := _EMAIL_HERE.match(text, position) or _EMAIL.search(text, position):
        # A match may end inside a run of local-part characters; the next may start right there (``_EMAIL_HERE``),
        # and any other start in that run reaches the same ``@``, so it matches only if that one does.
        parts += (text[position : found.start()], replacement)
        position = found.end()
    parts.append(text[position:])
    return "".join(parts)


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum every payment card number passes."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


class PIIRedaction(Interceptor):
    """Replace emails, card numbers (Luhn-checked, 13-19 digits) and phone numbers in every string of a result.

    A mapping's keys are strings of the result too: two keys redacted to the same text are both kept, the
    second numbered (``"[email redacted] (2)"``), so no entry of the result is lost.

    Options: ``kinds`` (any of ``email``, ``card``, ``phone``), ``replacement`` (``{kind}`` is filled in),
    ``tools`` (names; empty: every tool), ``min_phone_digits`` (fewer digits are not taken for a phone number,
    so dates and amounts survive).
    """

    name = "pii_redaction"

    def __init__(
        self,
        *,
        kinds: Sequence[str] = PII_KINDS,
        replacement: str = "[{kind} redacted]",
        tools: Sequence[str] = (),
        min_phone_digits: int = 9,
    ) -> None:
        unknown = sorted(set(kinds) - set(PII_KINDS))
        if unknown:
            raise ImproperlyConfigured(f"PIIRedaction: unknown kinds {unknown}; choose from {list(PII_KINDS)}.")
        self.kinds = [kind for kind in PII_KINDS if kind in kinds]  # cards before phones: a card is no phone
        self.replacement = replacement
        self.tools = frozenset(tools)
        self.min_phone_digits = min_phone_digits

    def after(self, call: InterceptedCall, result: Any) -> Any:
        if self.tools and call.tool_name not in self.tools:
            return result
        return self._walk(result)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, Mapping):
            return self._mapping(value)
        if isinstance(value, list | tuple):
            return [self._walk(item) for item in value]
        return value

    def _mapping(self, value: Mapping[Any, Any]) -> dict[Any, Any]:
        """Keys are redacted as values are (a count per sender); keys redacted alike are all kept, numbered."""
        redacted: dict[Any, Any] = {}
        numbers: dict[str, int] = {}
        for key, item in value.items():
            if isinstance(key, str):
                key = _unique_key(self.redact_text(key), redacted, numbers)
            redacted[key] = self._walk(item)
        return redacted

    def redact_text(self, text: str) -> str:
        for kind in self.kinds:
            if kind == "email":
                text = _redact_emails(text, self.replacement.format(kind="email"))
            elif kind == "card":
                text = _CARD.sub(lambda m: self._card(m.group(0)), text)
            else:
                text = _PHONE.sub(lambda m: self._phone(m.group(0)), text)
        return text

    def _card(self, found: str) -> str:
        digits = re.sub(r"\D", "", found)
        return self.replacement.format(kind="card") if 13 <= len(digits) <= 19 and luhn_valid(digits) else found

    def _phone(self, found: str) -> str:
        digits = re.sub(r"\D", "", found)
        return self.replacement.format(kind="phone") if self.min_phone_digits <= len(digits) <= 15 else found


def _unique_key(key: str, taken: Mapping[Any, Any], numbers: dict[str, int]) -> str:
    """``key``, or ``key (2)``, ``key (3)``...: the first not yet ``taken`` (``numbers``: where to go on from)."""
    candidate, number = key, numbers.get(key, 1)
    while candidate in taken:
        number += 1
        candidate = f"{key} ({number})"
    numbers[key] = number
    return candidate


# --- Argument allow/deny policy by JSON path -----------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    tool: str
    path: str
    expression: Any
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    message: str


class ArgumentPolicy(Interceptor):
    """Refuse calls whose arguments, at a JSON path (jsonpath-ng), match a denied pattern or no allowed one.

    ``rules``: ``[{"tool": "send_email", "path": "$.to", "deny": ["*@competitor.com"], "allow": [...],
    "message": "..."}]``. ``tool`` is a name or a glob (``*``: every tool). A pattern is a case-insensitive
    glob, or a regular expression written ``re:<expr>`` (it must match the whole value). A list found at the
    path is checked item by item. ``deny``: any matching value refuses; ``allow``: every value must match one.
    """

    name = "argument_policy"

    def __init__(self, *, rules: Sequence[Mapping[str, Any]]) -> None:
        from jsonpath_ng.exceptions import JsonPathParserError
        from jsonpath_ng.ext import parse

        self.rules: list[_Rule] = []
        for index, rule in enumerate(rules):
            path = str(rule.get("path", ""))
            try:
                expression = parse(path)
            except (JsonPathParserError, Exception) as exc:  # noqa: BLE001 - the parser raises several kinds
                raise ImproperlyConfigured(f"ArgumentPolicy rule {index}: bad JSON path {path!r} ({exc}).") from exc
            allow, deny = tuple(rule.get("allow") or ()), tuple(rule.get("deny") or ())
            if not allow and not deny:
                raise ImproperlyConfigured(f"ArgumentPolicy rule {index}: give 'allow' or 'deny' patterns.")
            for pattern in allow + deny:
                if pattern.startswith("re:"):
                    try:
                        re.compile(pattern[3:])
                    except re.error as exc:
                        raise ImproperlyConfigured(
                            f"ArgumentPolicy rule {index}: bad regex {pattern!r} ({exc})."
                        ) from exc
            self.rules.append(
                _Rule(str(rule.get("tool", "*")), path, expression, allow, deny, str(rule.get("message", "")))
            )

    def before(self, call: InterceptedCall) -> Refuse | None:
        for rule in self.rules:
            if not fnmatch.fnmatchcase(call.tool_name, rule.tool):
                continue
            for value in _values_at(rule.expression, call.arguments):
                denied = any(_matches(pattern, value) for pattern in rule.deny)
                unallowed = bool(rule.allow) and not any(_matches(pattern, value) for pattern in rule.allow)
                if denied or unallowed:
                    return Refuse(
                        rule.message
                        or f"The value {value!r} at {rule.path} is not allowed for tool {call.tool_name!r} by policy; "
                        "nothing was executed. Use another value or ask the user."
                    )
        return None


def _values_at(expression: Any, arguments: Mapping[str, Any]) -> list[str]:
    values: list[str] = []
    for match in expression.find(dict(arguments)):
        items = match.value if isinstance(match.value, list) else [match.value]
        values.extend(item if isinstance(item, str) else json.dumps(item) for item in items)
    return values


def _matches(pattern: str, value: str) -> bool:
    if pattern.startswith("re:"):
        return re.fullmatch(pattern[3:], value) is not None
    return fnmatch.fnmatchcase(value.lower(), pattern.lower())
