"""Admin pages that save what the person changed on them, never what the page only showed.

Django's list posts every row of the page and saves each row whose posted values differ from the database as it
is when the POST arrives: a list opened before a colleague switched a tool off (the catalogue's kill switch) or an
approval rule on, then saved for any other change, switched it back in the name of someone who never touched it.
:class:`StaleEditsRefused` makes each row's form carry the values it showed (Django's ``show_hidden_initial``), so
"changed" means changed on the page: a value nobody touched is kept as it is now, and a value changed on the page
that a colleague also changed since is refused (the row's error; nothing on the page is saved) rather than
silently overwriting theirs. Change pages work the same way (a rule's page opened to rename it, saved after a
colleague switched the rule on, left it on).
"""

from typing import Any

from django import forms
from django.http import HttpRequest
from django.utils.functional import cached_property

__all__ = ["ShownValuesKept", "StaleEditsRefused"]

STALE_MESSAGE = "Changed by someone else since you opened this page; reload it and try again."


class ShownValuesKept(forms.ModelForm):
    """A row's form (a list's or a change page's): its fields carry the value shown; only what was changed is saved."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept_as_shown: set[str] = set()
        if self.instance.pk is None:
            return  # a row being added: nobody else changed it
        pk_name = self._meta.model._meta.pk.name
        for name, field in self.fields.items():
            # Never a value the page keeps from the browser (a password, a hash shown read-only) in a hidden input.
            secret = getattr(field.widget, "input_type", "") == "password"
            # Values of one input each (a split date and time, a file are left as Django compares them).
            simple = not isinstance(field, (forms.MultiValueField, forms.FileField))
            if name != pk_name and not field.disabled and not secret and simple:
                field.show_hidden_initial = True
                self.kept_as_shown.add(name)

    @cached_property
    def changed_data(self) -> list[str]:
        """The fields changed on the page: compared with the value it showed (the current one when not posted)."""
        return [
            name
            for name, field in self.fields.items()
            if (
                field.has_changed(self._shown_value(name, field, self[name].initial), self[name].data)
                if name in self.kept_as_shown
                else self[name]._has_changed()
            )
        ]

    def _clean_fields(self) -> None:
        """Untouched fields a colleague changed since the page showed them are validated as stored.

        The row keeps them as stored (:meth:`_post_clean`), so every check (each field's, ``clean()``, the model's)
        must read that value, not the posted one: else a posted value checked but never saved (a hidden copy forged
        to equal it) lets the saved row pass a check it fails (a grant's allow kept beside a tool it may not allow).
        """
        if self.instance.pk is not None:
            touched = self.changed_data  # on the page as posted, before the data below stands for the stored row
            stale = [
                (name, field)
                for name, field in self.fields.items()
                if name in self.kept_as_shown
                and name not in touched
                and self._changed_since_shown(name, field, self[name].initial)
            ]
            if stale:
                data = self.data.copy()
                for name, field in stale:
                    shown_now = field.hidden_widget().format_value(field.prepare_value(self[name].initial))
                    _put(data, self.add_prefix(name), shown_now)
                self.data = data
        super()._clean_fields()

    def _post_clean(self) -> None:
        """Before the row is built from the form: untouched fields left out of it, stale edits refused.

        Here, after every ``clean()`` (a form layered over this one too: the grant page's tenant check), so each
        validates the whole row as it will be saved (:meth:`_clean_fields`); only building and saving the row leaves
        untouched fields out, exactly as stored.
        """
        cleaned = getattr(self, "cleaned_data", None)
        if self.instance.pk is not None and cleaned is not None:
            for name, field in self.fields.items():
                if name not in self.kept_as_shown or field.disabled or name not in cleaned:
                    continue
                if name not in self.changed_data:  # compared with the value shown: untouched on the page
                    # Not saved at all: the row keeps the value stored now, exactly (read back through the field, a
                    # text lost its surrounding spaces, and a value the form no longer offers left the shown one).
                    del cleaned[name]
                elif self._changed_since_shown(name, field, self[name].initial):  # initial: the row as stored now
                    self.add_error(name, forms.ValidationError(STALE_MESSAGE))
        super()._post_clean()

    def _changed_since_shown(self, name: str, field: forms.Field, current: Any) -> bool:
        r"""Whether the stored value differs from the one the page showed, both as the page's hidden copy spells them.

        Compared as text the browser sends back, not through ``to_python``: a text stored with ``\n`` comes back
        with ``\r\n``, one stored with surrounding spaces comes back stripped by the field, and neither is a
        colleague's change.
        """
        key = self.add_initial_prefix(name)
        if key not in self.data:
            return False  # a script's own form: Django's rule, the posted value stands
        hidden = field.hidden_widget()
        return _as_sent_back(self._widget_data_value(hidden, key)) != _as_sent_back(
            hidden.format_value(field.prepare_value(current))
        )

    def _shown_value(self, name: str, field: forms.Field, current: Any) -> Any:
        """The value the page showed; without it in the POST (a script's own form), the current one, as Django does."""
        key = self.add_initial_prefix(name)
        if name not in self.kept_as_shown or key not in self.data:
            return current
        try:
            return field.to_python(self._widget_data_value(field.hidden_widget(), key))
        except forms.ValidationError:
            return current


def _put(data: Any, key: str, value: Any) -> None:
    """Set ``key`` in a form's data (a ``QueryDict`` or a plain dict) to a hidden input's value(s) as posted."""
    values = [str(item) for item in value] if isinstance(value, (list, tuple)) else None
    if values is not None and hasattr(data, "setlist"):
        data.setlist(key, values)
    else:
        data[key] = values if values is not None else ("" if value is None else value)


def _as_sent_back(value: Any) -> list[str]:
    """A hidden input's value(s) as a browser posts them: text, newlines as CRLF, a multiple value's order ignored."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return sorted("" if item is None else str(item).replace("\r\n", "\n").replace("\n", "\r\n") for item in values)


class StaleEditsRefused:
    """Mixed into a ``ModelAdmin``: its editable list and change pages save only what the person changed on them."""

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)  # type: ignore[misc]
        return type(form.__name__, (ShownValuesKept, form), {})

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> type[forms.ModelForm]:
        base = super().get_changelist_form(request, **kwargs)  # type: ignore[misc]
        return type(base.__name__, (ShownValuesKept, base), {})
