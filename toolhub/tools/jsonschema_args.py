"""Validation of arguments against a hand-written JSON Schema (``Tool.create`` with a schema, ``Tool.external``).

Errors come out as a ``pydantic.ValidationError``, like every other tool's, so the pipeline reports
them to the model the same way: one line per problem, by location, never repeating the values sent.

``"format"`` is asserted, as the published schema promises the model and as a pydantic-typed tool
(``UUID``, ``date``) would: the formats jsonschema's checker knows for the schema's draft (``date``,
``date-time``, ``time``, ``email``, ``ipv4``, ``ipv6``, ``uuid``, ``regex``, ``idn-hostname``,
``json-pointer``); any other format (``uri``, ``hostname``, ...) is published and not checked.
"""

import copy
import weakref
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain, zip_longest
from typing import Any

import jsonschema
from jsonschema import FormatChecker
from jsonschema.exceptions import FormatError, SchemaError
from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, specification_with

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.linear_patterns import (
    PatternBudgetSpent,
    UnsupportedPattern,
    linear_validator,
    schema_matchers,
    schema_patterns,
)
from toolhub.tools.valid_schemas import check_against_metaschema
from toolhub.tools.validation_budget import MAX_VALIDATION_STEPS, ValidationBudgetSpent, validation_budget

__all__ = [
    "MAX_REPORTED_ERRORS",
    "MAX_SCHEMA_APPLICATIONS",
    "MAX_SCHEMA_DEPTH",
    "check_schema_bounds",
    "checked_object_schema",
    "schema_problems",
    "validate_against_schema",
]

#: How deeply schemas may nest in a parameters' schema (each ``properties``/``x`` pair is one; so is each
#: ``$ref`` followed in turn): validation recurses through them, and a remote MCP server chooses its schemas.
MAX_SCHEMA_DEPTH = 64

#: How many schemas one value may be checked against through ``$ref`` and same-value keywords (``allOf``...):
#: references shared across a fan-out multiply (``a0: allOf [a1, a1]``, ``a1: allOf [a2, a2]``... is 2**n checks
#: of every value from a few hundred bytes of schema), so a call's validation could take hours.
MAX_SCHEMA_APPLICATIONS = 10_000

#: How many distinct problems one check reports (the model reads them, the call's error and audit trail keep them):
#: one bad item of a ``$ref`` fan-out failed 1,024 leaves alike, and 5,000 wrong items gave 5,000 lines.
MAX_REPORTED_ERRORS = 20


def checked_object_schema(tool_name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """Check that ``schema`` is a valid JSON Schema of an object and return a normalized copy."""
    subject = f"Tool {tool_name!r}: the parameters' schema"
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(f"{subject} must be a JSON Schema object (a dict).")
    _check_nesting(subject, schema)
    normalized = copy.deepcopy(dict(schema))
    kind = normalized.setdefault("type", "object")
    if kind != "object":
        raise ToolDefinitionError(f"{subject} must describe an object (type 'object'), not {kind!r}.")
    normalized.setdefault("properties", {})
    if not isinstance(normalized["properties"], Mapping):
        raise ToolDefinitionError(f"Tool {tool_name!r}: 'properties' of the parameters' schema must be an object.")
    _check_bounded(subject, normalized)
    missing = [name for name in normalized.get("required", []) if name not in normalized["properties"]]
    if missing:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: the schema requires {missing}, which are not among its properties."
        )
    return normalized


def check_schema_bounds(subject: str, schema: Mapping[str, Any]) -> None:
    """Refuse (``ToolDefinitionError``) a schema that checking a value against would not run in bounded time and memory.

    The checks ``checked_object_schema`` makes of any schema, for one checked elsewhere (a remote tool's
    ``outputSchema``): nesting, valid JSON Schema, patterns (linear engine, budget), references (resolvable, no
    loop, no fan-out). ``subject`` begins each message (``"Tool 'x': the output schema"``).
    """
    _check_nesting(subject, schema)
    _check_bounded(subject, schema)


def _check_nesting(subject: str, schema: Mapping[str, Any]) -> None:
    if _nesting(schema) > 2 * MAX_SCHEMA_DEPTH:
        raise ToolDefinitionError(
            f"{subject} is nested more than {MAX_SCHEMA_DEPTH} schemas deep; "
            "checking a value against it would overflow the stack."
        )


def _check_bounded(subject: str, schema: Mapping[str, Any]) -> None:
    cls = jsonschema.validators.validator_for(schema)
    if cls is jsonschema.Draft3Validator:
        # Its ``extends``, ``disallow`` and schemas in ``type`` apply to the same value (a loop through them
        # recursed until ``RecursionError``), and ``referencing`` crashed crawling some of them.
        raise ToolDefinitionError(f"{subject} is JSON Schema draft 3, which is not supported; use draft 4 or later.")
    _check_patterns(subject, schema)
    try:
        # Patterns were checked above, in the dialect they run in (``_checker``: regex is not checked here).
        # Once per schema in a process (``valid_schemas``): about 1 ms a subschema, and remote schemas recur.
        check_against_metaschema(cls, dict(schema), _checker(cls))
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "(root)"
        raise ToolDefinitionError(f"{subject} is not valid JSON Schema at {where}: {exc.message}") from None
    dangling, looping = _unresolvable_refs(schema)
    if dangling:
        raise ToolDefinitionError(
            f"{subject} refers to {', '.join(map(repr, dangling[:5]))}, which "
            "resolve to nothing within it (references outside the schema are not fetched)."
        )
    if looping:
        raise ToolDefinitionError(
            f"{subject} reference {looping!r} refers to itself before describing "
            f"any value, through more than {MAX_SCHEMA_DEPTH} others nested in turn, or to more than "
            f"{MAX_SCHEMA_APPLICATIONS} schemas for one value ($ref, allOf, anyOf...): checking a value against it "
            "would never end, take too long or overflow the stack."
        )


def _check_patterns(subject: str, schema: Mapping[str, Any]) -> None:
    """Refuse a pattern the linear-time engine cannot run, rather than run it with backtracking ``re``.

    And one past the schema's budget (``schema_matchers``): its validator keeps every pattern compiled.
    ``unevaluatedProperties`` is refused beside ``patternProperties``: jsonschema re-runs those keys with ``re``.
    """
    for keyword, pattern, where, found in schema_matchers(schema):
        if isinstance(found, PatternBudgetSpent):
            raise ToolDefinitionError(
                f"{subject}'s {keyword!r} at {where} ({_bounded(repr(pattern))}) is refused: {found}."
            ) from found  # the cause says which budget (``remote_tool_unusable_reason``)
        if isinstance(found, UnsupportedPattern):
            raise ToolDefinitionError(
                f"{subject}'s {keyword!r} at {where} ({_bounded(repr(pattern))}) is not supported: {found} "
                "(look-around and backreferences are not; patterns run in linear time)."
            )
    if any(keyword == "patternProperties" for keyword, _, _ in schema_patterns(schema)) and any(
        "unevaluatedProperties" in node for node in _nodes(schema)
    ):
        raise ToolDefinitionError(
            f"{subject} uses 'unevaluatedProperties' with 'patternProperties', "
            "which would match those patterns with a backtracking engine; use 'additionalProperties' instead."
        )


def _unresolvable_refs(schema: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """The ``$ref`` s of ``schema`` that resolve to nothing within it, and one that loops back to itself.

    Dangling: pointers, anchors, ``$id`` s found nowhere (``$dynamicRef`` s too). Looping: one that comes back to
    itself with no value described in between (``None``: none does).

    Resolved by ``referencing`` (jsonschema's own resolver) on a registry holding this schema only, so a
    reference elsewhere is never fetched. Checked when the tool is built: validation would raise on either
    (a loop recurses until ``RecursionError``; a remote MCP server's schema may hold one on purpose).
    """
    nodes = _nodes(schema)
    # A ``$dynamicRef`` is looked up as a ``$ref`` is first: one resolving nowhere in the schema was fetched by
    # jsonschema at validation (any URL, no timeout, outside the outbound policy), its answer then the schema.
    refs = [node[key] for node in nodes for key in ("$ref", "$dynamicRef") if isinstance(node.get(key), str)]
    if not refs and not any(isinstance(node.get(key), str) for node in nodes for key in _DYNAMIC):
        return [], None
    resource = specification_with(str(schema.get("$schema", "")), default=DRAFT202012).create_resource(schema)
    base = resource.id() or ""
    resolver = Registry().with_resource(base, resource).crawl().resolver(base_uri=base)
    dangling = []
    for ref in dict.fromkeys(refs):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            dangling.append(ref)
    return dangling, None if dangling else _looping_ref(schema, resolver)


#: Keywords whose subschemas apply to the same value as their parent: following only these, a schema that
#: comes back to itself is a loop validation never leaves (through ``properties`` or ``items`` it is a tree).
#: ``dependencies`` is draft 4-7's ``dependentSchemas`` (a name's value there may be a list of names instead).
_SAME_VALUE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies")
_NAMED_SAME_VALUE = frozenset({"dependentSchemas", "dependencies"})


#: References resolved by the dynamic scope at validation (2020-12's and 2019-09's).
_DYNAMIC = ("$dynamicRef", "$recursiveRef")


def _looping_ref(schema: Mapping[str, Any], resolver: Any) -> str | None:
    """A ``$ref`` from which ``$ref`` and same-value keywords lead back to where they started, or ``None``.

    A chain of them longer than ``MAX_SCHEMA_DEPTH`` counts as one too: validation follows it by recursion; so
    does one leading to more than ``MAX_SCHEMA_APPLICATIONS`` schemas (counted with repeats, as validation
    checks them). Walked without recursion, each node finished once, so no schema can make this check itself
    overflow the stack or take longer than linear time.
    """
    nodes = _nodes(schema)
    # ``$dynamicRef``/``$recursiveRef`` land where the dynamic scope says: count every schema they may land on.
    dynamic: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        if isinstance(node.get("$dynamicAnchor"), str):
            dynamic.setdefault("$dynamicRef#" + node["$dynamicAnchor"], []).append(node)
        if node.get("$recursiveAnchor") is True or node is schema:
            dynamic.setdefault("$recursiveRef#", []).append(node)
    depth: dict[int, int] = {}  # node -> the longest same-value chain below it (once finished)
    applied: dict[int, int] = {}  # node -> how many schemas checking a value against it checks it against

    def same_value(node: Mapping[str, Any]) -> list[tuple[Any, str | None]]:
        nexts: list[tuple[Any, str | None]] = []
        if isinstance(node.get("$ref"), str):
            nexts.append((resolver.lookup(node["$ref"]).contents, node["$ref"]))
        for key in _DYNAMIC:
            if isinstance(node.get(key), str):
                fragment = node[key].partition("#")[2]
                nexts.extend((target, node[key]) for target in dynamic.get(f"{key}#{fragment}", [schema]))
        for key in _SAME_VALUE:
            value = node.get(key)
            if isinstance(value, Mapping) and key in _NAMED_SAME_VALUE:
                nexts.extend((item, None) for item in value.values())
            elif isinstance(value, list):
                nexts.extend((item, None) for item in value)
            else:
                nexts.append((value, None))
        return [(item, ref) for item, ref in nexts if isinstance(item, Mapping)]

    for start in nodes:
        if id(start) in depth:
            continue
        on_path: set[int] = {id(start)}
        stack = [(start, iter(same_value(start)))]
        while stack:
            node, children = stack[-1]
            child, ref = next(children, (None, None))
            if child is None:
                stack.pop()
                on_path.discard(id(node))
                below = [id(c) for c, _ in same_value(node)]
                depth[id(node)] = 1 + max((depth[c] for c in below), default=0)
                applied[id(node)] = min(1 + sum(applied[c] for c in below), MAX_SCHEMA_APPLICATIONS + 1)
                if depth[id(node)] > MAX_SCHEMA_DEPTH or applied[id(node)] > MAX_SCHEMA_APPLICATIONS:
                    own = node.get("$ref")  # ``ref`` is spent here: name the reference this node makes, if any
                    return own if isinstance(own, str) else "(a chain of references)"
            elif id(child) in on_path:
                return ref or "(allOf/anyOf/oneOf)"
            elif id(child) not in depth:
                on_path.add(id(child))
                stack.append((child, iter(same_value(child))))
    return None


def _nodes(node: Any) -> list[Mapping[str, Any]]:
    """Every mapping within ``node`` (itself included) in document order, walked without recursion."""
    found: list[Mapping[str, Any]] = []
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            found.append(item)
            pending.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            pending.extend(reversed(item))
    return found


def _nesting(node: Any) -> int:
    """How deeply ``node`` nests (a scalar: 0), measured without recursion."""
    deepest, pending = 0, [(node, 1)]
    while pending:
        item, level = pending.pop()
        children = item.values() if isinstance(item, Mapping) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            pending.extend((child, level + 1) for child in children)
    return deepest


#: Each tool's validator and the schema it was built from, kept as long as the tool: a remote MCP tool is built
#: again on every governance change, and a cache outliving it would keep every version of every schema.
_validators: "weakref.WeakKeyDictionary[object, tuple[dict[str, Any], Any]]" = weakref.WeakKeyDictionary()

#: How much of a schema's own value (a pattern, an enum member) an error message may quote.
_SHOWN = 100


class _ContainedFormatChecker(FormatChecker):
    """jsonschema's format checks, where a check that crashes on the value sent is that value's format error.

    ``regex`` compiles what the model sent: a pattern nested past the recursion limit, or a repetition too
    large, raises ``RecursionError`` or ``OverflowError`` rather than the ``re.error`` the checker expects.
    """

    def check(self, instance: object, format: str) -> None:
        try:
            super().check(instance, format)
        except FormatError:
            raise
        except Exception:  # noqa: BLE001 - any crash of a check on a model's value is a failed check
            raise FormatError(f"the value is not a {format!r}") from None


def _validator(schema: dict[str, Any]) -> Any:
    """The schema's validator (its draft's), asserting the formats that draft's checker knows.

    Its ``pattern`` and ``patternProperties`` are matched in linear time (``linear_patterns``).
    """
    return linear_validator(schema, format_checker=_checker(jsonschema.validators.validator_for(schema)))


def _checker(cls: Any) -> FormatChecker:
    """``cls``'s format checks but ``regex``: ECMA-262's dialect, which Python's ``re`` would misjudge."""
    checker = _ContainedFormatChecker(formats=())
    checker.checkers = {
        name: check for name, check in cls.FORMAT_CHECKER.checkers.items() if name not in _PUBLISHED_ONLY
    }
    return checker


#: Formats published with a schema but not asserted here, since no checker of the right dialect is at hand.
_PUBLISHED_ONLY = frozenset({"regex"})


def validate_against_schema(
    tool_name: str, schema: dict[str, Any], arguments: Mapping[str, Any], *, owner: object | None = None
) -> dict[str, Any]:
    """Validate ``arguments``; raise ``pydantic.ValidationError`` listing each problem without values.

    ``owner``: the tool whose (unchanging) ``schema`` this is; its validator is built once and lives as long as it.
    """
    cached = _validators.get(owner) if owner is not None else None
    if cached is not None and cached[0] is schema:
        validator = cached[1]
    else:
        validator = _validator(schema)
        if owner is not None:
            _validators[owner] = (schema, validator)
    values = dict(arguments)
    line_errors: list[InitErrorDetails] = []
    try:
        with validation_budget():  # the work of one check, bounded whatever the schema and the arguments
            errors = list(validator.iter_errors(values))
    except ValidationBudgetSpent:
        message = (
            f"checking the arguments against the schema took more than {MAX_VALIDATION_STEPS:,} steps; "
            "send fewer items at a time"
        )
        raise ValidationError.from_exception_data(
            f"{tool_name} arguments",
            [InitErrorDetails(type=PydanticCustomError("json_schema", message), loc=(), input=None)],
            hide_input=True,
        ) from None
    reported, unreported = schema_problems(errors)
    for loc, message in reported:
        line_errors.append(InitErrorDetails(type=PydanticCustomError("json_schema", message), loc=loc, input=None))
    if unreported:
        more = f"... and {unreported:,} more problems not listed; fix those above first"
        line_errors.append(InitErrorDetails(type=PydanticCustomError("json_schema", more), loc=(), input=None))
    if line_errors:
        raise ValidationError.from_exception_data(f"{tool_name} arguments", line_errors, hide_input=True)
    return values


def schema_problems(errors: Iterable[Any]) -> tuple[list[tuple[tuple[Any, ...], str]], int]:
    """The ``errors`` jsonschema found as ``(location, message)``, without the values, and how many more there were.

    Each distinct problem once (one bad item of a ``$ref`` fan-out failed 1,024 leaves alike), by location, at
    most ``MAX_REPORTED_ERRORS``: the model reads them, the call's error and the audit trail keep them.

    Chosen a kind at a time (``_kind``: the same rule failed at items of the same arrays), one of each kind before
    a second of any: 100 bad items of one array must not hide a different problem of another field.
    """
    problems: dict[tuple[tuple[Any, ...], str], None] = {}
    described: set[tuple[Any, ...]] = set()
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        location = tuple(error.absolute_path)
        if error.validator in _WHOLE_OBJECT:
            # jsonschema yields one ``required`` error per missing name; each describes every one of them.
            key = (error.validator, location, id(error.schema))
            if key in described:
                continue
            described.add(key)
        problems.update(dict.fromkeys(_describe(error, location)))
    kinds: dict[tuple[tuple[Any, ...], str], list[tuple[tuple[Any, ...], str]]] = {}
    for problem in problems:
        kinds.setdefault(_kind(problem), []).append(problem)
    in_turn = [problem for turn in zip_longest(*kinds.values()) for problem in turn if problem is not None]
    chosen = set(in_turn[:MAX_REPORTED_ERRORS])
    reported = [problem for problem in problems if problem in chosen]  # in the order of their locations
    return reported, len(problems) - len(reported)


#: Rules ``_describe`` reports for the whole object at once (each missing name, each extra property).
_WHOLE_OBJECT = frozenset({"required", "additionalProperties"})


def _kind(problem: tuple[tuple[Any, ...], str]) -> tuple[tuple[Any, ...], str]:
    """A problem without its items' indexes: ``xs.0`` and ``xs.7`` of one type are one kind, ``zz``'s another."""
    location, message = problem
    return tuple(part for part in location if not isinstance(part, int)), message


def _describe(error: Any, location: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    """Say what is wrong in the schema's terms; jsonschema's own messages repeat the value, these do not."""
    rule, expected, instance = error.validator, error.validator_value, error.instance
    if rule == "required" and isinstance(instance, Mapping):
        return [((*location, name), "Field required") for name in expected if name not in instance]
    if rule == "additionalProperties" and isinstance(instance, Mapping):
        known = set(error.schema.get("properties", {}))
        return [((*location, str(name)), "Extra inputs are not permitted") for name in instance if name not in known]
    if rule == "type":
        return [(location, f"Input should be of type {expected}")]
    if rule in ("enum", "const"):
        options = expected if rule == "enum" else [expected]
        return [(location, f"Input should be one of {_quoted(options)}")]
    if rule == "format":
        return [(location, f"Input should be a valid {_quoted([expected])} (the schema's format)")]
    if rule in (
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minProperties",
        "maxProperties",
        "pattern",
    ):
        return [(location, f"Input should satisfy {rule} {_quoted([expected])}")]
    return [(location, f"Input does not satisfy the schema's {rule!r} rule")]


def _quoted(options: Iterable[Any]) -> str:
    """``_bounded`` of the options' reprs, joined, reading only as much as it shows.

    An enum and each member may be large: ``repr`` of a 650 KB member, per error, took 38 s for 10,000 items.
    """
    shown: list[str] = []
    length = 0
    for index, option in enumerate(options):
        for piece in chain([", "] if index else [], _repr_pieces(option)):
            shown.append(piece)
            length += len(piece)
            if length > _SHOWN:
                return _bounded("".join(shown))
    return _bounded("".join(shown))


def _repr_pieces(value: Any) -> Iterator[str]:
    """``repr(value)`` of a JSON value, a piece at a time (a long string cut first), so a reader may stop early."""
    if isinstance(value, Mapping):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield f"{', ' if index else ''}{repr(key[: _SHOWN + 1] if isinstance(key, str) else key)}: "
            yield from _repr_pieces(item)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for index, item in enumerate(value):
            yield ", " if index else ""
            yield from _repr_pieces(item)
        yield "]"
    else:
        yield repr(value[: _SHOWN + 1] if isinstance(value, str) else value)


def _bounded(text: str) -> str:
    """A schema's own value as quoted in a message: a long pattern or enum is cut, the message stays short."""
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}..."
