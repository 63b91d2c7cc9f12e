"""The console's JSON form fields, held to the limits of every other JSON intake (``toolhub.json_intake``).

Django's ``forms.JSONField`` decodes what was posted with a bare ``json.loads``, once to clean it and again to show
it back (``bound_data``): text nested thousands deep raised ``RecursionError``, an integer of more digits than
``sys.get_int_max_str_digits()`` raised ``ValueError`` and a lone surrogate's escape decoded to a lone surrogate the
page could not be written out with, so the edit pages of tool groups, remote MCP servers, approval rules and agents
answered 500. Every model ``JSONField`` of a console form is now this field (``CheckedJSONFields``, mixed into the
admins' bases): such a value is an error at its field, worded as the REST API words it, and nothing is saved.
"""

import functools
import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.forms.fields import InvalidJSONInput, JSONString

from toolhub.conf import toolhub_settings
from toolhub.json_intake import JSONRefused, RefusalKind, json_loads_checked

__all__ = ["CheckedJSONFields", "CheckedJSONFormField"]


class CheckedJSONFormField(forms.JSONField):
    """A form's ``JSONField`` nested at most ``MAX_REQUEST_NESTING`` deep, holding only what the database stores."""

    def to_python(self, value: Any) -> Any:
        if self.disabled or value in self.empty_values or not isinstance(value, str):
            return super().to_python(value)
        try:
            converted = self._loads(value)
        except JSONRefused as refused:
            raise ValidationError(_message(refused), code=f"json_{refused.kind.value}") from None
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data: Any, initial: Any) -> Any:
        """The posted value as the page shows it again: the text as posted when it is refused, never decoded."""
        if self.disabled or data is None or not isinstance(data, str):
            return super().bound_data(data, initial)
        try:
            return self._loads(data)
        except JSONRefused:
            return InvalidJSONInput(data)

    def _loads(self, text: str) -> Any:
        loads = functools.partial(json.loads, cls=self.decoder)
        return json_loads_checked(text, max_depth=toolhub_settings().MAX_REQUEST_NESTING, loads=loads)


def _message(refused: JSONRefused) -> str:
    """Worded as the API's JSON fields word it (``toolhub.api.fields``), with what to do; nothing was saved."""
    if refused.kind == RefusalKind.STORAGE:
        return f"{refused.about('The value')}. Remove it or write it out as text; nothing was saved."
    if refused.kind == RefusalKind.NESTING:
        return f"{refused.about('The value')} (TOOLHUB['MAX_REQUEST_NESTING']). Flatten it; nothing was saved."
    return f"{refused.about('The value')}. Enter valid JSON; nothing was saved."


class CheckedJSONFields:
    """Mixed into a ``ModelAdmin``: its forms' model ``JSONField`` columns are ``CheckedJSONFormField``."""

    def formfield_for_dbfield(self, db_field: "models.Field[Any, Any]", request: Any, **kwargs: Any) -> Any:
        if isinstance(db_field, models.JSONField) and "form_class" not in kwargs:
            kwargs["form_class"] = CheckedJSONFormField
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
