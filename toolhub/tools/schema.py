"""Assembling JSON Schema: from a tool's parameters to the pydantic model that validates them and its schema."""

from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from toolhub.exceptions import ToolDefinitionError
from toolhub.tools.specs import Param, ParameterSpec

__all__ = [
    "build_input_model",
    "closed_model",
    "drop_titles",
    "fast_json_schema",
    "json_schema_of",
    "parameter_core_schemas",
]


def build_input_model(tool_name: str, parameters: tuple[ParameterSpec, ...]) -> type[BaseModel]:
    """Build the pydantic model that validates a call's arguments (extra arguments are refused)."""
    fields: dict[str, Any] = {}
    for spec in parameters:
        annotation = _strip_param(spec.annotation)
        fields[spec.name] = (annotation, Field(spec.default, description=spec.description))
    model_name = "".join(part.capitalize() for part in tool_name.replace("-", "_").split("_")) + "Arguments"
    try:
        return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
    except Exception as exc:  # noqa: BLE001 - pydantic raises several kinds for unsupported types
        raise ToolDefinitionError(f"Tool {tool_name!r}: its parameters cannot be validated ({exc}).") from exc


def fast_json_schema(parameters: tuple[ParameterSpec, ...]) -> dict[str, Any] | None:
    """The inputs' JSON Schema assembled from per-type schemas (cached across tools), without building a model.

    It equals what the input model would give (the tests hold it to that); ``None`` when it cannot
    tell for sure (two different types under one name), and the model is used instead.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    definitions: dict[str, Any] = {}
    for spec in parameters:
        adapter_schema = _type_schema(_strip_param(spec.annotation))
        if adapter_schema is None:
            return None
        fragment = dict(adapter_schema)
        for name, definition in fragment.pop("$defs", {}).items():
            if definitions.setdefault(name, definition) != definition:
                return None
        if spec.description:
            fragment["description"] = spec.description
        if spec.required:
            required.append(spec.name)
        else:
            try:
                fragment["default"] = _type_adapter(_strip_param(spec.annotation)).dump_python(
                    spec.default, mode="json"
                )
            except Exception:  # noqa: BLE001 - let the model path decide
                return None
        properties[spec.name] = fragment
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties, "type": "object"}
    if required:
        schema["required"] = required
    if definitions:
        schema["$defs"] = definitions
    return drop_titles(schema)  # type: ignore[no-any-return]


_FORBID = ConfigDict(extra="forbid")
_type_schemas: dict[Any, dict[str, Any]] = {}
_type_adapters: dict[Any, TypeAdapter[Any]] = {}


def parameter_core_schemas(parameters: tuple[ParameterSpec, ...]) -> list[Any]:
    """Each parameter's pydantic core schema, from the per-type adapters ``fast_json_schema`` shares (no model built).

    A type pydantic cannot validate is left out: building the model names it with the tool's name.
    """
    schemas = []
    for spec in parameters:
        try:
            schemas.append(_type_adapter(_strip_param(spec.annotation)).core_schema)
        except Exception:  # noqa: BLE001 - pydantic raises several kinds for unsupported types
            continue
    return schemas


def _type_adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        adapter = _type_adapters.get(annotation)
    except TypeError:
        return TypeAdapter(annotation)
    if adapter is None:
        adapter = _type_adapters[annotation] = TypeAdapter(annotation)
    return adapter


def _type_schema(annotation: Any) -> dict[str, Any] | None:
    try:
        cached = _type_schemas.get(annotation)
        hashable = True
    except TypeError:
        cached, hashable = None, False
    if cached is not None:
        return cached
    try:
        # As the items of a list, a class comes out as a $ref to its definition, exactly as in a model's field.
        # The input model's extra="forbid" reaches nested dataclasses and TypedDicts; so must it here.
        as_items = TypeAdapter(list[annotation], config=_FORBID).json_schema()
    except Exception:  # noqa: BLE001 - the model path reports the problem with the tool's name
        return None
    schema = dict(as_items.get("items", {}))
    if "$defs" in as_items:
        schema["$defs"] = as_items["$defs"]
    if hashable:
        _type_schemas[annotation] = schema
    return schema


def json_schema_of(tool_name: str, model: type[BaseModel]) -> dict[str, Any]:
    """Return the JSON Schema of a tool's input model, without pydantic's generated titles."""
    try:
        schema = model.model_json_schema()
    except Exception as exc:  # noqa: BLE001
        raise ToolDefinitionError(f"Tool {tool_name!r}: no JSON Schema for its parameters ({exc}).") from exc
    cleaned: dict[str, Any] = drop_titles(schema)
    cleaned.setdefault("properties", {})
    return cleaned


def drop_titles(node: Any) -> Any:
    if isinstance(node, dict):
        cleaned = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "properties" and isinstance(value, dict):
                cleaned[key] = {name: drop_titles(prop) for name, prop in value.items()}
            else:
                cleaned[key] = drop_titles(value)
        return cleaned
    if isinstance(node, list):
        return [drop_titles(item) for item in node]
    return node


def _strip_param(annotation: Any) -> Any:
    """Replace toolhub's ``Param`` markers (pydantic does not know them) inside ``Annotated``."""
    if get_origin(annotation) is not Annotated:
        return annotation
    base, *extras = get_args(annotation)
    kept = [extra for extra in extras if not isinstance(extra, Param)]
    if not kept:
        return base
    return Annotated[(base, *kept)]


def closed_model(model: type[BaseModel]) -> type[BaseModel]:
    """The model itself when it refuses unknown fields, else a subclass that does."""
    if model.model_config.get("extra") == "forbid":
        return model
    return type(model.__name__, (model,), {"model_config": ConfigDict(**{**model.model_config, "extra": "forbid"})})
