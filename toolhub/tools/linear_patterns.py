r"""JSON Schema's regular expressions (``pattern``, ``patternProperties``) matched in linear time.

jsonschema runs them with Python's backtracking ``re``: a schema's ``^(a+)+$`` (a remote MCP server chooses its
schemas) against forty characters a model sends holds the process, and its GIL, for hours. Here they run on
Rust's ``regex`` (through pydantic-core, already a dependency), whose matching time is linear in the text. Its
syntax lacks look-around and backreferences: a schema using them is refused when its tool is built, never
matched by a backtracking fallback.

The engine bounds each compiled pattern (10 MiB); one schema's patterns are bounded together too
(``MAX_SCHEMA_PATTERNS``, ``MAX_SCHEMA_PATTERN_BYTES``): a validator keeps every pattern of its schema compiled,
and fifty ``\w{200}`` of a remote server's schema held 583 MiB in each process.

A pydantic-typed tool's ``Field(pattern=...)`` runs on the same engine, unless its model asks for Python's
(``regex_engine="python-re"``) or the pattern is a compiled ``re.Pattern`` (pydantic-core then matches with ``re``):
``backtracking_patterns`` finds those, and such a tool is refused when its input model is built.
"""

import hashlib
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError as SchemaViolation
from pydantic_core import SchemaError, SchemaValidator, ValidationError, core_schema
from referencing import Registry

from toolhub.tools.linear_keywords import bounded_keywords
from toolhub.tools.validation_budget import CHARACTERS_PER_UNIT, BudgetedValidator, counted_keywords, spend

__all__ = [
    "MAX_SCHEMA_PATTERNS",
    "MAX_SCHEMA_PATTERN_BYTES",
    "MAX_SERVER_PATTERN_BYTES",
    "PatternBudgetSpent",
    "UnsupportedPattern",
    "backtracking_patterns",
    "backtracking_refusal",
    "compile_pattern",
    "linear_validator",
    "schema_matchers",
    "schema_patterns",
    "shared_pattern_budget",
    "SharedPatternBudgetSpent",
]

Matcher = Callable[[str], bool]

#: A lone surrogate (JSON's ``"\ud800"`` decodes to one): Rust's strings cannot hold it, so the engine refused the
#: whole text and every pattern "failed to match": ``not: {pattern: "^rm"}`` then admitted ``"rm -rf /\ud800"``
#: and a ``patternProperties`` key skipped its schema. Each is matched as U+FFFD, one character as it was.
#: (A single character class: linear in Python's ``re`` too.)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

#: Keywords whose values are data, not schemas: a ``pattern`` key inside them is no pattern.
_DATA = frozenset({"const", "enum", "default", "examples"})
#: Keywords mapping names to schemas: their keys are names, any name (``default`` too) holding a schema.
#: (``dependencies``: draft 4-7's ``dependentSchemas``; a name's list of names there holds no pattern.)
_NAMED_SCHEMAS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)


#: The engine's bound on one compiled pattern (Rust ``regex``'s default ``size_limit``, as pydantic-core builds it).
ENGINE_PATTERN_BYTES = 10 * 2**20

#: How many distinct patterns one schema may hold (each one compiled and kept by its validator).
MAX_SCHEMA_PATTERNS = 48

#: How much one schema's patterns may compile to together, as estimated by ``pattern_weight``: about three
#: patterns near the engine's bound (Unicode ``\w{200}`` is one), a dozen mid-sized ones (``^\w{1,32}$``), or
#: ``MAX_SCHEMA_PATTERNS`` small ones.
MAX_SCHEMA_PATTERN_BYTES = 32 * 2**20

#: How much the schemas of one remote MCP server's tools may compile to together (``shared_pattern_budget``): each
#: schema is held to ``MAX_SCHEMA_PATTERN_BYTES``, but a server lists as many tools as it likes, and probing one
#: schema's patterns near a tier's bound takes about 20 s (a hundred tools: half an hour of each process building
#: the registry). About a hundred small distinct patterns, under a minute of probing at worst.
MAX_SERVER_PATTERN_BYTES = 2 * MAX_SCHEMA_PATTERN_BYTES

#: A pattern's weight tiers, by how many copies of it fit in one compile of the engine's bound: 16 copies fit, it
#: counts a sixteenth of the bound; else 4 copies, a quarter; else the whole bound. Each probe is one compile of at
#: most the engine's bound, whatever the pattern.
_WEIGHT_REPEATS = (16, 4)
_SMALL_PATTERN_BYTES = ENGINE_PATTERN_BYTES // _WEIGHT_REPEATS[0]


class UnsupportedPattern(ValueError):
    """A pattern the linear-time engine cannot run (look-around, a backreference, a syntax error, too large)."""


class PatternBudgetSpent(UnsupportedPattern):
    """A pattern past its schema's budget (``MAX_SCHEMA_PATTERNS``, ``MAX_SCHEMA_PATTERN_BYTES``), not compiled."""


class SharedPatternBudgetSpent(PatternBudgetSpent):
    """A pattern past the budget its schema shares with others (``shared_pattern_budget``), not compiled."""


#: Core-schema nodes whose ``config`` sets the regex engine of the strings within them.
_CONFIGURED = frozenset({"model", "dataclass", "typed-dict"})


def backtracking_patterns(schema: Mapping[str, Any]) -> list[str]:
    """The patterns of a pydantic core ``schema`` that pydantic-core would match with Python's backtracking ``re``.

    A string's pattern given as a compiled ``re.Pattern``, or under ``regex_engine="python-re"`` (its own, or the
    config of the nearest model, dataclass or TypedDict holding it). A ``definition-ref`` is followed to the schema
    it names, under the engine where it is made: pydantic-core builds a shared definition (a type alias used twice,
    a recursive model) with the config of each place referring to it, not of where ``definitions`` lists it. Walked
    without recursion, each definition once per engine (a recursive model refers to itself).
    """
    definitions = _definitions(schema)
    followed: set[tuple[str, str]] = set()
    found: list[str] = []
    pending: list[tuple[Any, str]] = [(schema, "rust-regex")]
    while pending:
        node, engine = pending.pop()
        if isinstance(node, list | tuple):
            pending.extend((item, engine) for item in node)
            continue
        if not isinstance(node, Mapping):
            continue
        config = node.get("config")
        if node.get("type") in _CONFIGURED and isinstance(config, Mapping):
            engine = config.get("regex_engine", "rust-regex")
        pattern = node.get("pattern")
        if node.get("type") == "str" and pattern is not None:
            if isinstance(pattern, re.Pattern) or node.get("regex_engine", engine) == "python-re":
                found.append(pattern.pattern if isinstance(pattern, re.Pattern) else str(pattern))
        ref = node.get("schema_ref")
        if node.get("type") == "definition-ref" and isinstance(ref, str) and (ref, engine) not in followed:
            followed.add((ref, engine))
            pending.extend((target, engine) for target in definitions.get(ref, ()))
        pending.extend((value, engine) for value in node.values() if isinstance(value, Mapping | list | tuple))
    return list(dict.fromkeys(found))


def _definitions(schema: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """Each ``ref`` of a pydantic core ``schema`` -> the schemas carrying it (listed in ``definitions`` or inline)."""
    held: dict[str, list[Mapping[str, Any]]] = {}
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, list | tuple):
            pending.extend(node)
        elif isinstance(node, Mapping):
            if isinstance(node.get("ref"), str):
                held.setdefault(node["ref"], []).append(node)
            pending.extend(value for value in node.values() if isinstance(value, Mapping | list | tuple))
    return held


def backtracking_refusal(tool_name: str, patterns: list[str]) -> str | None:
    """Why a tool whose parameters hold ``patterns`` (``backtracking_patterns``) is refused, or ``None`` (none)."""
    if not patterns:
        return None
    shown = patterns[0] if len(patterns[0]) <= 100 else f"{patterns[0][:100]}..."
    return (
        f"Tool {tool_name!r}: its parameters' pattern {shown!r} would be matched by Python's backtracking re (a "
        "compiled re.Pattern, or regex_engine='python-re'), in time a model's value can make exponential; give it as "
        "a str with pydantic's default engine (Rust's regex: no look-around or backreferences)"
    )


def compile_pattern(pattern: str) -> Matcher:
    """A search (unanchored, as JSON Schema's) for ``pattern`` in linear time; ``UnsupportedPattern`` if none."""
    try:
        validator = SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex", strict=True))
    except SchemaError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise UnsupportedPattern((lines[-1] if lines else "not a pattern")[:200]) from None

    def matches(text: str) -> bool:
        try:
            validator.validate_python(_LONE_SURROGATE.sub("\ufffd", text))
        except ValidationError:
            return False
        return True

    return matches


def pattern_weight(pattern: str) -> int:
    """How many bytes ``pattern`` (one the engine compiles) counts for in its schema's ``MAX_SCHEMA_PATTERN_BYTES``.

    The engine tells no compiled size, only whether one fits its bound: ``pattern`` repeated ``n`` times fits when
    it compiles to less than the bound's ``n``-th part (``_WEIGHT_REPEATS``, largest first, so a small pattern costs
    one probe). The newline ends an ``(?x)`` comment.

    Probed once per process (``_weights``): a probe near its bound compiles the engine's whole bound (0.4 s), and
    a schema is checked when its tool is built, again when its validator is built, a remote tool's output schema
    at each call (48 such patterns took 20 s each time).
    """
    key = hashlib.blake2b(pattern.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with _weights_lock:
        known = _weights.get(key)
    if known is not None:
        return known
    weight = ENGINE_PATTERN_BYTES
    for repeats in _WEIGHT_REPEATS:
        try:
            compile_pattern(f"(?:{pattern}\n){{{repeats}}}")
        except UnsupportedPattern:
            continue
        weight = ENGINE_PATTERN_BYTES // repeats
        break
    with _weights_lock:
        if len(_weights) >= _WEIGHTS_KEPT:
            del _weights[next(iter(_weights))]  # the oldest
        _weights[key] = weight
    return weight


#: Patterns' weights already probed (by digest: a pattern may be long), the latest ``_WEIGHTS_KEPT``.
_WEIGHTS_KEPT = 4096
_weights: dict[bytes, int] = {}
_weights_lock = threading.Lock()


@dataclass
class _SharedBudget:
    subject: str
    limit: int
    spent: int = 0
    seen: set[str] = field(default_factory=set)


_shared: ContextVar[_SharedBudget | None] = ContextVar("toolhub_shared_pattern_budget", default=None)


@contextmanager
def shared_pattern_budget(subject: str, limit: int = MAX_SERVER_PATTERN_BYTES) -> Iterator[None]:
    """Schemas checked inside share ``limit`` (a distinct pattern counted once): one server's tools, together.

    Past it, a schema's further patterns are refused without being probed (``PatternBudgetSpent``), so the tools
    checked inside cost at most ``limit``'s probing whatever their number. ``subject`` names the budget's owner
    in the refusal ("remote MCP server 'crm'"). Check in a stable order: the same tools are refused each time.
    """
    token = _shared.set(_SharedBudget(subject, limit))
    try:
        yield
    finally:
        _shared.reset(token)


def schema_matchers(schema: Any) -> Iterator[tuple[str, str, str, Matcher | UnsupportedPattern]]:
    """Each distinct pattern of ``schema`` as ``(keyword, pattern, where, matcher)``, or why it has no matcher.

    Compiled in ``schema_patterns``' order within the schema's budget: past ``MAX_SCHEMA_PATTERNS`` distinct ones,
    or ``MAX_SCHEMA_PATTERN_BYTES`` together, the rest are not compiled (each refused, the first saying why).
    """
    seen: set[str] = set()
    spent = 0
    shared = _shared.get()
    for keyword, pattern, where in schema_patterns(schema):
        if pattern in seen:
            continue
        seen.add(pattern)
        if len(seen) > MAX_SCHEMA_PATTERNS:
            yield (
                keyword,
                pattern,
                where,
                PatternBudgetSpent(
                    f"the schema holds more than {MAX_SCHEMA_PATTERNS} distinct patterns (each is compiled and kept)"
                ),
            )
            continue
        if spent > MAX_SCHEMA_PATTERN_BYTES:
            yield keyword, pattern, where, PatternBudgetSpent("the schema's other patterns spent its budget")
            continue
        if shared is not None and pattern not in shared.seen and shared.spent > shared.limit:
            yield keyword, pattern, where, SharedPatternBudgetSpent(_shared_refusal(shared))
            continue
        try:
            matcher = compile_pattern(pattern)
        except UnsupportedPattern as exc:
            yield keyword, pattern, where, exc
            continue
        weight = pattern_weight(pattern)
        spent += weight
        if shared is not None and pattern not in shared.seen:
            shared.seen.add(pattern)
            shared.spent += weight
            if shared.spent > shared.limit:
                yield keyword, pattern, where, SharedPatternBudgetSpent(_shared_refusal(shared))
                continue
        if spent > MAX_SCHEMA_PATTERN_BYTES:
            yield (
                keyword,
                pattern,
                where,
                PatternBudgetSpent(
                    f"the schema's patterns together compile to more than {MAX_SCHEMA_PATTERN_BYTES // 2**20} MiB "
                    f"(a pattern counts {_SMALL_PATTERN_BYTES // 2**10} KiB, "
                    f"{ENGINE_PATTERN_BYTES // _WEIGHT_REPEATS[-1] / 2**20:g} MiB or "
                    f"{ENGINE_PATTERN_BYTES // 2**20} MiB "
                    "by its size; Unicode \\w, \\d or . repeated are large: [A-Za-z0-9_] is not)"
                ),
            )
            continue
        yield keyword, pattern, where, matcher


def _shared_refusal(shared: _SharedBudget) -> str:
    return (
        f"the patterns of {shared.subject}'s tools together compile to more than {shared.limit // 2**20} MiB "
        "(each distinct pattern counts once; the tools checked first keep theirs); "
        "an administrator may ask the server for fewer or smaller patterns"
    )


def schema_patterns(schema: Any) -> Iterator[tuple[str, str, str]]:
    """Each ``(keyword, pattern, where)`` in ``schema``, walked without recursion (data values skipped)."""
    pending: list[tuple[Any, str, bool]] = [(schema, "", False)]
    while pending:
        node, where, named = pending.pop()
        if isinstance(node, list):
            pending.extend((item, f"{where}/{index}", False) for index, item in enumerate(node))
            continue
        if not isinstance(node, Mapping):
            continue
        if named:  # name -> schema: every value is a schema, whatever its name
            pending.extend((value, f"{where}/{key}", False) for key, value in node.items())
            continue
        if isinstance(node.get("pattern"), str):
            yield "pattern", node["pattern"], f"{where}/pattern" or "/"
        if isinstance(node.get("patternProperties"), Mapping):
            for key in node["patternProperties"]:
                yield "patternProperties", str(key), f"{where}/patternProperties"
        for key, value in node.items():
            if key not in _DATA:
                pending.append((value, f"{where}/{key}", key in _NAMED_SCHEMAS))


#: Units (``validation_budget``) of one match beside its characters: a call into the engine, about 2.5 us.
_MATCH_UNITS = 5


def linear_validator(
    schema: Mapping[str, Any], format_checker: jsonschema.FormatChecker | None = None, **options: Any
) -> Any:
    """``schema``'s jsonschema validator (its draft's) with its patterns matched in linear time.

    And ``uniqueItems``/``multipleOf`` bounded (``linear_keywords``): a value's check is never quadratic, never crashes.

    Each pattern is compiled once, for this validator, within the schema's budget (``schema_matchers``); one the
    engine cannot run, or past the budget, fails every value checked against it (the tool holding it was refused
    when built, so only a schema checked elsewhere meets this); so does one found where ``schema_patterns`` does
    not look (a ``$ref`` into an ``examples`` value): it is never compiled outside the budget.
    ``options``: passed on to the validator; its ``registry`` is an empty one unless given, so a reference the
    schema does not hold is never fetched (jsonschema's default registry retrieves any URL, without a timeout).
    """
    options.setdefault("registry", Registry())
    matchers = {
        patrn: None if isinstance(found, UnsupportedPattern) else found
        for _, patrn, _, found in schema_matchers(schema)
    }

    def search(pattern: str, text: str) -> bool | None:
        # Charged per match: ``patternProperties`` matches each pattern with each name (48 x 20,000 per object).
        spend(_MATCH_UNITS + len(text) // CHARACTERS_PER_UNIT)
        matcher = matchers.get(pattern)
        return None if matcher is None else matcher(text)

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if validator.is_type(instance, "string") and not search(patrn, instance):
            # Named, not written out: the pattern may be long, and the error carries it (``validator_value``).
            yield SchemaViolation("the value does not match the schema's 'pattern'")

    def pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                found = search(patrn, key)
                if found is None:
                    yield SchemaViolation(f"the pattern {patrn!r} is not supported")
                elif found:
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[SchemaViolation]:
        if not validator.is_type(instance, "object"):
            return
        named, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
        extras = [key for key in instance if key not in named and not any(search(patrn, key) for patrn in patterns)]
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif not extra and extras:
            yield SchemaViolation("Additional properties are not allowed")

    draft = jsonschema.validators.validator_for(schema)
    keywords = {
        **draft.VALIDATORS,
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        **bounded_keywords(draft),  # uniqueItems, enum, const, multipleOf bounded (``linear_keywords``)
    }
    # Each keyword applied counts against the check's ``validation_budget``: the work is bounded per check, a
    # check made outside any budget within its own (``BudgetedValidator``).
    cls = jsonschema.validators.extend(draft, counted_keywords(keywords))  # type: ignore[no-untyped-call]
    return BudgetedValidator(cls(schema, format_checker=format_checker, **options))
