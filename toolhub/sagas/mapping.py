"""Compensation arguments: the tool's explicit mapping, else names matched from the result, then the arguments.

Names match case-, ``_``- and camelCase-insensitively: ``txId``, ``tx_id`` and ``TX_ID`` are one name.
A value of one of the step's sensitive arguments goes only to a parameter the compensation declares sensitive
too: anything else would show it, on the compensation's call, to everyone who may read that call.
An error of a mapping function is scrubbed of those values before it is stored or shown anywhere. Planned
arguments are kept as JSON (a mapping may return a ``Decimal``), as a call's arguments are.
"""

import dataclasses
import re
import typing
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from toolhub.exceptions import ToolhubError
from toolhub.storable import json_storage_problem
from toolhub.tools.definition import Tool
from toolhub.tools.secrets import MIN_SECRET_LENGTH, SecretScrubber, sensitive_values

__all__ = [
    "MappingError",
    "normalized_name",
    "match_arguments",
    "compensation_arguments",
    "known_result_fields",
    "unmatched_parameters",
    "sensitive_parameters_copied",
]


class MappingError(ToolhubError):
    """The arguments of a compensation cannot be built from the original call."""


_SEPARATORS = re.compile(r"[_\-\s]")


def normalized_name(name: str) -> str:
    """The form two names are compared in: no separators, case folded (``txId`` == ``tx_id``)."""
    return _SEPARATORS.sub("", name).casefold()


def match_arguments(
    parameters: Iterable[Any], sources: Iterable[tuple[str, Mapping[str, Any]]], *, compensation: str
) -> dict[str, Any]:
    """Fill each parameter from the first source holding its name; a missing required one is an error.

    ``sources`` are ``(label, mapping)`` pairs, most preferred first (the result, then the arguments).
    """
    indexed = []
    for label, values in sources:
        index: dict[str, Any] = {}
        for key, value in values.items():
            index.setdefault(normalized_name(str(key)), value)
        indexed.append((label, index))
    matched: dict[str, Any] = {}
    missing: list[str] = []
    for spec in parameters:
        key = normalized_name(spec.name)
        for _, index in indexed:
            if key in index:
                matched[spec.name] = index[key]
                break
        else:
            if spec.default is ...:
                missing.append(spec.name)
    if missing:
        looked_in = "; ".join(f"{label}: {', '.join(sorted(index)) or '-'}" for label, index in indexed)
        raise MappingError(
            f"Compensation {compensation!r} needs {', '.join(missing)}, found neither in the original result nor in "
            f"its arguments ({looked_in}). Give the original tool a mapping function, or rename the parameters."
        )
    return matched


def compensation_arguments(
    *, tool: Tool, compensation: Tool, arguments: Mapping[str, Any], result: Any
) -> dict[str, Any]:
    """The arguments of ``compensation`` for a call of ``tool`` with ``arguments`` that returned ``result``."""
    sensitive = sensitive_values(arguments, tool.sensitive, declared=tool.declared_names)
    planned = _planned_arguments(
        tool=tool, compensation=compensation, arguments=arguments, result=result, sensitive=sensitive
    )
    planned = _as_json(planned, tool=tool, compensation=compensation)
    copied = _copied_into(compensation, planned, sensitive)
    if copied:
        raise MappingError(
            f"Compensation {compensation.name!r} would receive the value of a sensitive argument of {tool.name!r} "
            f"in {', '.join(copied)}, which it does not declare sensitive; it was not planned, so that the value is "
            f"shown nowhere. Declare @tool(sensitive={tuple(copied)!r}) on it."
        )
    return planned


def _as_json(planned: dict[str, Any], *, tool: Tool, compensation: Tool) -> dict[str, Any]:
    """The planned arguments as the JSON they are stored and sent as, as a call's arguments are.

    A mapping function may return the compensation's own types (a ``Decimal``, a ``datetime``, a ``UUID``): they
    are written as JSON, which the compensation's validation reads back. Anything no column stores is a mapping
    error naming the parameter and the type, never the value (it may be sensitive).
    """
    jsonable: dict[str, Any] = {}
    for name, value in planned.items():
        try:
            jsonable[str(name)] = to_jsonable_python(value)
        except (PydanticSerializationError, ValueError, TypeError):
            raise MappingError(
                f"The compensation mapping of {tool.name!r} gave {compensation.name!r}'s {name!r} a "
                f"{type(value).__name__}, which cannot be written as JSON; return JSON values or types pydantic "
                "writes as JSON (str, numbers, Decimal, datetime, UUID, lists, dicts)."
            ) from None
        problem = json_storage_problem(jsonable[str(name)], str(name))
        if problem:
            raise MappingError(
                f"The compensation mapping of {tool.name!r} gave {compensation.name!r} a value that cannot be "
                f"stored: {problem}."
            )
    return jsonable


def _copied_into(compensation: Tool, planned: Mapping[str, Any], sensitive: list[str]) -> list[str]:
    """The compensation's parameters, not sensitive themselves, whose planned value holds a sensitive value.

    A value, or an item nested in it, equal to a sensitive value is found whatever its length (a 3-digit CVV
    copied whole); the scrubber's minimum length only bounds finding one inside longer text.
    """
    if not sensitive:
        return []
    exact = {value for value in sensitive if value}
    scrubber = SecretScrubber(sensitive)
    return sorted(
        name
        for name, value in planned.items()
        if name not in compensation.sensitive
        and (
            not exact.isdisjoint(sensitive_values(planned, (name,), declared=compensation.declared_names))
            or scrubber.value(value) != value
        )
    )


def sensitive_parameters_copied(tool: Tool, compensation: Tool) -> list[str]:
    """Parameters of ``compensation``, not sensitive, that names would fill from a sensitive argument of ``tool``.

    Known before any call only when names do the mapping (no mapping function) and the result does not hold
    the name (the result is looked in first).
    """
    if tool.compensation_mapping is not None or not tool.sensitive:
        return []
    sensitive = {normalized_name(name) for name in tool.sensitive}
    from_result = {normalized_name(name) for name in known_result_fields(tool) or ()}
    return [
        p.name
        for p in compensation.parameters
        if p.name not in compensation.sensitive
        and normalized_name(p.name) in sensitive
        and normalized_name(p.name) not in from_result
    ]


def _planned_arguments(
    *, tool: Tool, compensation: Tool, arguments: Mapping[str, Any], result: Any, sensitive: list[str]
) -> dict[str, Any]:
    if tool.compensation_mapping is not None:
        try:
            mapped = tool.compensation_mapping(dict(arguments), result)
        except Exception as exc:  # noqa: BLE001 - a broken mapping is reported on the compensation, not raised
            # from None: the original exception (its args, its frames) holds the values the message must not show.
            raise MappingError(
                f"The compensation mapping of {tool.name!r} raised {_scrubbed_error(exc, sensitive)}"
            ) from None
        if not isinstance(mapped, Mapping):
            raise MappingError(
                f"The compensation mapping of {tool.name!r} returned {type(mapped).__name__}, not a mapping of "
                f"{compensation.name!r}'s arguments."
            )
        return dict(mapped)
    sources: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(result, Mapping):
        sources.append(("result", result))
    sources.append(("arguments", arguments))
    return match_arguments(compensation.parameters, sources, compensation=compensation.name)


def _scrubbed_error(exc: Exception, sensitive: list[str]) -> str:
    """The exception's type and message, with the step's sensitive values replaced like any error of the call.

    A sensitive value too short for the scrubber (``MIN_SECRET_LENGTH``) that shows in the message cannot be
    replaced safely: only the type is kept, and the message says why.
    """
    shown = f"{type(exc).__name__}: {exc}"
    if any(value and len(value) < MIN_SECRET_LENGTH and value in shown for value in sensitive):
        return f"{type(exc).__name__} (its message is withheld: it may show a sensitive argument)"
    return SecretScrubber(sensitive).text(shown)


def known_result_fields(tool: Tool) -> frozenset[str] | None:
    """The field names a tool's result will have, when its return annotation says (pydantic, TypedDict, dataclass)."""
    try:
        hints = typing.get_type_hints(tool.handler, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable hints mean an unknown result type
        return None
    annotation = hints.get("return")
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if not isinstance(annotation, type):
        return None
    if issubclass(annotation, BaseModel):
        names: set[str] = set()
        for name, field in annotation.model_fields.items():
            names.add(name)
            names.update(alias for alias in (field.alias, field.serialization_alias) if alias)
        return frozenset(names)
    if typing.is_typeddict(annotation):
        return frozenset(typing.get_type_hints(annotation))
    if dataclasses.is_dataclass(annotation):
        return frozenset(field.name for field in dataclasses.fields(annotation))
    return None


def unmatched_parameters(tool: Tool, compensation: Tool) -> list[str] | None:
    """Required parameters of ``compensation`` no known result field or argument of ``tool`` can fill.

    ``None`` when it cannot be known before a call: the tool has a mapping function, or its result type
    is not declared precisely.
    """
    if tool.compensation_mapping is not None:
        return None
    fields = known_result_fields(tool)
    if fields is None:
        return None
    available = {normalized_name(name) for name in fields} | {normalized_name(p.name) for p in tool.parameters}
    return [p.name for p in compensation.parameters if p.default is ... and normalized_name(p.name) not in available]
