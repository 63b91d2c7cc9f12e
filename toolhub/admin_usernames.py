r"""The user pages' forms: a username chosen here cannot read as someone else's.

Django's rule (``\w``) admits a Hangul filler (drawn as nothing) and letters of any script, so ``alice\u3164`` or
a Cyrillic ``\u0430lice`` read ``alice`` on the desk, in approvers' e-mail and as a trail event's actor. Names are
refused where they are chosen (``toolhub.visible.lookalike_problem``); a name already stored is left to its owner.
"""

from typing import Any

from django import forms
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm

from toolhub.visible import lookalike_problem

__all__ = ["UserAddForm", "UserEditForm"]


class _PlainUsername(forms.ModelForm):
    def clean_username(self) -> Any:
        django_clean = getattr(super(), "clean_username", None)  # the creation form's case-insensitive uniqueness
        name = django_clean() if django_clean is not None else self.cleaned_data["username"]
        problem = lookalike_problem(name) if name != self.instance.get_username() else None
        if problem:
            raise forms.ValidationError(f"Choose another username: {problem}; it would read as another person's name.")
        return name


class UserAddForm(_PlainUsername, AdminUserCreationForm):
    """Django's add form, its username checked for look-alikes."""


class UserEditForm(_PlainUsername, UserChangeForm):
    """Django's change form, a new username checked for look-alikes."""
