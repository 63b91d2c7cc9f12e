"""Serializer fields for JSON a client sends inside a request, in whatever body format the API accepts.

DRF's ``JSONField`` decodes a form field's text (multipart, urlencoded) with a bare ``json.loads``:
that text never passed the JSON body check (``StorableJSONParser``), so ``[[[...]]]`` thousands
deep raised ``RecursionError`` (a 500) and a NUL reached the database. ``CheckedJSONField`` holds it
to the body's limits through ``toolhub.json_intake``, and checks values a parser decoded the same way.
"""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from toolhub.conf import toolhub_settings
from toolhub.json_intake import JSONRefused, RefusalKind, json_loads_checked, json_value_problem

__all__ = ["CheckedJSONField", "JSONObjectField", "JSONObjectOrTextField"]


class CheckedJSONField(serializers.JSONField):
    """A ``JSONField`` nested at most ``MAX_REQUEST_NESTING`` deep, holding only text the database can store."""

    def to_internal_value(self, data: Any) -> Any:
        limit = toolhub_settings().MAX_REQUEST_NESTING
        if self.binary or getattr(data, "is_json_string", False):  # text to decode (a form field), as DRF's own
            try:
                text = data.decode() if isinstance(data, bytes) else str(data)
                return json_loads_checked(text, max_depth=limit, path=self.field_name)
            except UnicodeDecodeError:
                self.fail("invalid")
            except JSONRefused as refused:
                raise serializers.ValidationError(_message(refused)) from None
        refused_value = json_value_problem(data, max_depth=limit, path=self.field_name)
        if refused_value is not None:
            raise serializers.ValidationError(_message(refused_value))
        return super().to_internal_value(data)


_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": {}}


@extend_schema_field(_OBJECT)
class JSONObjectField(CheckedJSONField):
    """A ``CheckedJSONField`` its view reads as an object (anything else is refused there): documented as one."""


@extend_schema_field({"oneOf": [_OBJECT, {"type": "string", "description": "The object as JSON text."}]})
class JSONObjectOrTextField(CheckedJSONField):
    """A ``CheckedJSONField`` its view reads as an object or that object's JSON text: documented as either."""


def _message(refused: JSONRefused) -> str:
    """Worded as the JSON body check words it (``StorableJSONParser``), about the field's value."""
    if refused.kind == RefusalKind.STORAGE:
        return f"{refused.about('The value')}. Remove it or write it out as text; nothing was done."
    return f"{refused.about('The value')}. Nothing was done."
