r"""The user pages' forms: a username chosen here cannot read as someone else's.

Django's rule (``\w``) admits a Hangul filler (drawn as nothing) and letters of any script, so ``alice\u3164`` or
a Cyrillic ``\u0430lice`` read ``alice`` on the desk, in approvers' e-mail and as a trail event's actor. Names are
refused where they are chosen (``toolhub.visible.lookalike_problem``), and so is one that reads as an existing
account's (``toolhub.confusable_names``: ``ɑlice``, an all-Cyrillic copy); a name already stored is left to its owner.
"""

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm

from toolhub.confusable_names import reads_as_existing
from toolhub.visible import lookalike_problem

__all__ = ["UserAddForm", "UserEditForm", "username_problem"]


def username_problem(name: str, *, other_than: Any = None) -> str | None:
    """Why ``name`` may not be chosen, if it may not: it reads as another's on its own or as an existing account's.

    One rule wherever a username is chosen: the user pages' forms, ``createsuperuser`` and ``load_demo``.
    ``other_than``: the primary key of the account being renamed, whose own name it may read as. The name is read as
    the user model stores it (NFKC, ``normalize_username``): ``createsuperuser`` checks it as typed, and ``ᴬᴰᴹᴵᴺ``
    (modifier letters, drawn apart from ``admin``) is stored as ``ADMIN``.
    """
    name = get_user_model().normalize_username(name)
    problem = lookalike_problem(name)
    if problem:
        return f"{problem}; it would read as another person's name"
    existing = reads_as_existing(name, other_than=other_than)
    if existing is not None:
        return f"it reads as the existing account {existing!r} (Unicode's confusables)"
    return None


class _PlainUsername(forms.ModelForm):
    def clean_username(self) -> Any:
        django_clean = getattr(super(), "clean_username", None)  # the creation form's case-insensitive uniqueness
        name = django_clean() if django_clean is not None else self.cleaned_data["username"]
        if name is None or name == self.instance.get_username():
            return name  # None: Django's form already refused it (a name taken in another case)
        problem = username_problem(name, other_than=self.instance.pk)
        if problem:
            raise forms.ValidationError(f"Choose another username: {problem}.")
        return name


class UserAddForm(_PlainUsername, AdminUserCreationForm):
    """Django's add form, its username checked for look-alikes."""


class UserEditForm(_PlainUsername, UserChangeForm):
    """Django's change form, a new username checked for look-alikes."""
