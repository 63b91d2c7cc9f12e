"""The forms of the approval desk: a comment, the version reviewed, and the arguments to edit before approving.

The argument fields are generated from the tool's JSON Schema (one field per non-sensitive parameter,
typed and bounded as the schema says), so an operator edits a value in a field of its kind and sees
a mistake at that field. The JSON box stays for what a field cannot hold; both go through the same
intake as a model's arguments in the service (``approval_approve``), which has the final word.
"""

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from django import forms

from toolhub.arguments import MAX_NESTING, ArgumentsRefused, parse_arguments
from toolhub.json_intake import JSONRefused, RefusalKind, json_loads_checked
from toolhub.tools.definition import Tool
from toolhub.tools.export import listed_schema
from toolhub.tools.registry import registry

__all__ = [
    "DecisionForm",
    "ApproveForm",
    "CommentForm",
    "ARGUMENT_PREFIX",
    "DEFINITION_CHANGED",
    "definition_changed",
    "fields_version",
    "shown_fields_version",
]

#: Why an approval posted from a page read under another definition of the tool is refused.
DEFINITION_CHANGED = (
    "The tool's definition changed since you read this page; nothing was recorded. Review the call as it stands now."
)

#: Generated argument fields are named ``arg__<parameter>`` so they never clash with the form's own fields.
ARGUMENT_PREFIX = "arg__"


class CommentForm(forms.Form):
    """One comment for every selected request (the bulk actions' confirmation page)."""

    comment = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "placeholder": "Why? (the model reads it on rejection)"}),
        help_text="Recorded with every decision; on rejection the model reads it as the tool's result.",
    )


class DecisionForm(CommentForm):
    """The operator's comment (for a rejection, what the model reads) and the version they reviewed.

    ``round`` and ``arguments_hash`` are the version shown on the page: approving a version that is no
    longer current is refused by the service, so nobody approves arguments they did not see.
    """

    round = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    arguments_hash = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)


class ApproveForm(DecisionForm):
    """Approving may edit the arguments: in the generated fields or as a JSON object (the values it changes)."""

    arguments = forms.CharField(
        label="Arguments as JSON",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 60, "spellcheck": "false"}),
        help_text="Change a value to edit the call before approving it. An edit opens a new round: every other "
        "required approval is given again by someone who saw the edited arguments.",
    )

    #: What made the page's fields (``fields_version``): they are read only as they were made.
    fields_version = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)

    def __init__(self, *args: Any, tool_name: str = "", current: Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.current = dict(current or {})
        tool = registry.get(tool_name) if tool_name else None
        self.tool = tool
        self.kinds: dict[str, str] = {}
        if tool is None or (self.is_bound and not any(key.startswith(ARGUMENT_PREFIX) for key in self.data)):
            return  # no tool to describe, or a client that posts the JSON box alone (as the API does)
        schema = listed_schema(tool)
        if schema is None:
            return  # its parameters are unknown: no field to make (the page says why: ``unbuildable_problem``)
        required = set(schema.get("required", ()))
        for name, spec in (schema.get("properties") or {}).items():
            if name in tool.sensitive:
                continue  # never shown, never pre-filled: kept unless typed into the JSON box
            if self.is_bound and ARGUMENT_PREFIX + name not in self.data:
                # A browser posts every field its page showed: this one was not on the page the operator read
                # (the tool's definition changed since: a parameter no longer sensitive, a new one), so it is no
                # field of this decision and edits nothing.
                continue
            field, kind = _field_for(_resolve(spec, schema), name in required, self.current.get(name))
            self.kinds[name] = kind
            self.fields[ARGUMENT_PREFIX + name] = field

    def clean_fields_version(self) -> str:
        """Refuse a page whose fields another definition of the tool made: they meant what that one said.

        Read with a new schema, an untouched value could differ (5000 posted as text where a number was) and be
        taken for the operator's edit; a parameter made sensitive since has no field, and its edit would be
        dropped without a word. Empty (a client that does not send it): the service's checks alone apply.
        """
        seen = self.cleaned_data["fields_version"]
        if self.tool is not None and definition_changed(self.tool.name, seen):
            raise forms.ValidationError(DEFINITION_CHANGED)
        return seen

    def argument_fields(self) -> list[forms.BoundField]:
        """The generated fields, in the schema's order, for the template."""
        return [self[ARGUMENT_PREFIX + name] for name in self.kinds]

    def clean_arguments(self) -> dict[str, Any] | None:
        """The JSON box as a mapping (``None`` when empty), through the same intake as a model's arguments."""
        text = self.cleaned_data["arguments"]
        if not text.strip():
            return None
        try:
            return parse_arguments(text, self.tool)
        except ArgumentsRefused as refused:
            raise forms.ValidationError(str(refused)) from None

    def clean(self) -> dict[str, Any]:
        """Collect the edit: the values that differ from the version on the page, from the fields and the JSON box."""
        cleaned = super().clean()
        changes: dict[str, Any] = {}
        for name, kind in self.kinds.items():
            key = ARGUMENT_PREFIX + name
            if key not in cleaned:
                continue
            try:
                value = _typed(cleaned[key], kind, self.current.get(name), name)
            except forms.ValidationError as error:
                self.add_error(key, error)
                continue
            if value is _UNSET:
                continue
            if value != self.current.get(name):
                changes[name] = value
        typed = cleaned.get("arguments")
        for name, value in (typed or {}).items():
            if value == self.current.get(name):
                continue
            if name in changes and changes[name] != value:
                self.add_error("arguments", f"{name} is edited both in its field and here; keep one of the two.")
                continue
            changes[name] = value
        cleaned["edit"] = changes or None
        return cleaned


_UNSET = object()


def fields_version(tool: Tool) -> str:
    """What the decision form's fields are made from: the tool's version and which parameters are sensitive.

    Sensitivity is no part of the tool's version (it changes how a call is shown, not what it means), but it
    decides which fields the page has.
    """
    material = json.dumps([tool.version, sorted(tool.sensitive)])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def shown_fields_version(tool_name: str) -> str:
    """The ``fields_version`` a page shows a request of ``tool_name`` under ("" for a tool no longer registered).

    "" too for one whose schema cannot be built (``listed_schema``): no field is made from it, and approving its
    call is refused (``toolhub.execution_checks.unbuildable_problem``).
    """
    tool = registry.get(tool_name)
    return fields_version(tool) if tool is not None and listed_schema(tool) is not None else ""


def definition_changed(tool_name: str, seen: str) -> bool:
    """Whether a page's ``fields_version`` (``seen``; empty: not sent) names another definition than the tool's now.

    A page approves the call as that definition showed it; the worker holds a call approved under another version
    again, and other sensitive names showed other arguments.
    """
    current = shown_fields_version(tool_name)
    return bool(seen) and bool(current) and seen != current


def _resolve(spec: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """A property's schema with a local ``$ref`` followed (``#/$defs/Name``), its own keys kept on top."""
    ref = spec.get("$ref", "")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = (schema.get("$defs") or {}).get(ref.removeprefix("#/$defs/"), {})
        return {**target, **{k: v for k, v in spec.items() if k != "$ref"}}
    return spec


def _field_for(spec: Mapping[str, Any], required: bool, current: Any) -> tuple[forms.Field, str]:
    """The form field of one parameter and how its text becomes a value (``text``, ``int``, ``number``, ...)."""
    options: dict[str, Any] = {
        "required": required,
        "help_text": spec.get("description", ""),
    }
    if "enum" in spec:
        values = list(spec["enum"])
        choices = [(json.dumps(v), str(v)) for v in values]
        if current is not None and current not in values:
            # The tool changed its choices while the call was held: a browser would select another value for an
            # untouched Approve (an edit nobody made); the value stays, shown as such, and the service judges it.
            choices.insert(0, (json.dumps(current), f"{current} (no longer one of the choices)"))
        if not required:
            choices.insert(0, ("", "(not set)"))
        initial = json.dumps(current) if current is not None else ""
        return forms.ChoiceField(choices=choices, initial=initial, **options), "enum"
    kind = spec.get("type")
    if kind == "string":
        options.update(max_length=spec.get("maxLength"), min_length=spec.get("minLength"))
        return _TextField(initial=current, widget=_text_widget(current), **options), "text"
    if kind == "integer":
        options.update(min_value=spec.get("minimum"), max_value=spec.get("maximum"))
        return forms.IntegerField(initial=current, **options), "int"
    if kind == "number":
        options.update(min_value=spec.get("minimum"), max_value=spec.get("maximum"))
        return forms.FloatField(initial=current, **options), "number"
    if kind == "boolean":
        choices = [("", "(not set)"), ("true", "yes"), ("false", "no")]
        initial = "" if current is None else ("true" if current else "false")
        return forms.ChoiceField(choices=choices, initial=initial, **options), "bool"
    # Anything else (a union, an object, a list): text when the value is text, JSON otherwise.
    initial = current if isinstance(current, str) or current is None else json.dumps(current, ensure_ascii=False)
    widget = _text_widget(current) if isinstance(current, str) or current is None else forms.Textarea(attrs={"rows": 3})
    options["help_text"] = (options["help_text"] + " Text, or a JSON value.").strip()
    return _TextField(initial=initial, widget=widget, **options), "json"


class _TextField(forms.CharField):
    """Text as the operator typed it: kept whole (no strip), its line breaks as a textarea means them (LF).

    A browser posts every line break of a textarea as CRLF whatever the value held (the HTML form submission
    rules), so CRLF and a lone CR are read back as LF, and lengths count as the schema counts them.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(strip=False, **options)

    def to_python(self, value: Any) -> Any:
        value = super().to_python(value)
        return _line_breaks(value) if isinstance(value, str) else value


def _line_breaks(text: str) -> str:
    """``text`` with its line breaks as a browser's textarea gives them back (LF), to compare and to keep."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _text_widget(current: Any) -> forms.Widget:
    """A textarea for text of several lines: an ``<input type="text">`` drops line breaks from its value."""
    if isinstance(current, str) and ("\n" in current or "\r" in current):
        return forms.Textarea(attrs={"rows": min(12, current.count("\n") + 2)})
    return forms.TextInput()


def _typed(value: Any, kind: str, current: Any, name: str) -> Any:
    """The value a cleaned field stands for; ``_UNSET`` for an optional field left empty.

    JSON text nested too deep or holding what no column stores is an error at its field (``ValidationError``).
    """
    if value in (None, "") and kind in ("text", "json", "enum", "bool", "int", "number"):
        return _UNSET if current is None else (None if kind != "text" else "")
    if kind in ("text", "json") and isinstance(current, str) and value == _line_breaks(current):
        return current  # untouched: a value with CR line breaks comes back with LF from the browser
    if kind == "enum":
        return json.loads(value)
    if kind == "bool":
        return value == "true"
    if kind == "number" and float(value).is_integer() and isinstance(current, int):
        return int(value)
    if kind == "json" and not isinstance(current, str):
        try:
            # the value sits one level inside the arguments object, which may nest MAX_NESTING deep in all
            return json_loads_checked(value, max_depth=MAX_NESTING - 1, path=name)
        except JSONRefused as refused:
            if refused.kind != RefusalKind.SYNTAX:
                raise forms.ValidationError(f"{refused.about('The value')}.") from None
            return value  # plain text for a union that accepts text; the service's schema check decides
    return value
