"""The console's admin site: Django's, its login and the password-change page's old-password check under the lockout.

Both check the password one attempt at a time per (username, address) pair
(:func:`toolhub.login_guard.authenticate_serialized`): axes' count is read before the comparison and the failure
recorded after, so simultaneous guesses would otherwise all be compared.

Django's page checks the old password with ``check_password``, so whoever held an operator's unlocked session (a
shared workstation, a stolen cookie) could guess the account's real password without bound, and keep it for
afterwards and elsewhere. Here the check is :func:`toolhub.login_guard.password_verify`: it counts toward the same
(username, address) lockout as logins, and a locked pair gets the lockout page, with nothing changed; while the pair
is locked, the page itself (a GET) answers with that lockout page too, rather than invite a password it will refuse.
:class:`toolhub.apps.ToolhubAdminConfig` makes this site ``admin.site``. A password changed here is a
``governance.changed`` event, as one changed on the user's page (only that it changed, never the hash).
"""

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib.admin import AdminSite, ModelAdmin
from django.contrib.admin.forms import AdminAuthenticationForm, AdminPasswordChangeForm
from django.contrib.auth import get_user_model
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponseBase
from django.template.response import SimpleTemplateResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_variables

from toolhub.admin_actions import rows_checked
from toolhub.admin_drawn import drawn_view
from toolhub.admin_relations import withheld_namer
from toolhub.governance_trail import USER_TENANTS, governance_append, governance_recorded, governance_tenants
from toolhub.login_guard import authenticate_serialized, lockout_response, password_locked, password_verify
from toolhub.withheld_names import names_withheld

__all__ = ["GuardedAuthenticationForm", "GuardedPasswordChangeForm", "ToolhubAdminSite"]

_View = TypeVar("_View", bound=Callable[..., HttpResponseBase])


class GuardedAuthenticationForm(AdminAuthenticationForm):
    """The admin's login form, its password checked while the (username, address) pair is held."""

    @method_decorator(sensitive_variables("password"))
    def clean(self) -> dict[str, Any]:
        """Django's ``AuthenticationForm.clean``, its ``authenticate`` the serialized one."""
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            # An account refused here (inactive, not staff) is refused under the pair's hold and counted as a failure.
            self.user_cache = authenticate_serialized(
                self.request, username, password, allowed=self.confirm_login_allowed
            )
            if self.user_cache is None:
                raise self.get_invalid_login_error()
        return self.cleaned_data


class GuardedPasswordChangeForm(AdminPasswordChangeForm):
    """Django's password-change form, its old password checked as a login from the request's address."""

    def __init__(self, user: Any, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        self.request = request
        super().__init__(user, *args, **kwargs)

    def clean_old_password(self) -> str:
        old_password: str = self.cleaned_data["old_password"]
        if not password_verify(self.request, self.user, old_password):
            raise ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")
        return old_password

    def save(self, commit: bool = True) -> Any:
        """Saves the new password with its event, in the chains of the user's tenants, in one transaction."""
        with transaction.atomic():
            stored = get_user_model()._default_manager.get(pk=self.user.pk)  # the form's user may be request.user, lazy
            tenants = governance_tenants(stored, fields=(), lookups=USER_TENANTS)
            before = governance_recorded(stored, tenants=tenants)
            user = super().save(commit=commit)
            if commit:
                stored.refresh_from_db()
                actor = f"user:{self.request.user.get_username()}"
                governance_append(stored, "changed", actor=actor, tenants=tenants, before=before)
            return user


class GuardedPasswordChangeView(PasswordChangeView):
    """Hands the request to the form: the lockout counts per address."""

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}


class ToolhubAdminSite(AdminSite):
    """``admin.site``: Django's admin site, its login and password change (the header's "Change password") guarded."""

    login_form = GuardedAuthenticationForm

    def admin_view(self, view: _View, cacheable: bool = False) -> _View:
        """Each view behind the login; every list's checks its posted row ids first (``rows_checked``).

        Every page draws its row's name (title, breadcrumb, delete question) written out (``admin_drawn``).
        """
        owner = getattr(view, "__self__", None)
        if isinstance(owner, ModelAdmin) and getattr(view, "__name__", "") == "changelist_view":
            view = cast(_View, rows_checked(owner, view))
        return super().admin_view(cast(_View, self._viewer_named(drawn_view(view))), cacheable)

    def _viewer_named(self, view: _View) -> _View:
        """``view``, a shared row its viewer may not see named by its kind (``toolhub.withheld_names``).

        The page is rendered while the viewer is bound: its titles and lists draw names when rendered.
        """

        @wraps(view)
        def named(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            with names_withheld(withheld_namer(self, request)):
                response = view(request, *args, **kwargs)
                if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
                    response.render()
            return response

        return cast(_View, named)

    def password_change(  # type: ignore[override]  # the stubs say TemplateResponse; a success is a redirect
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponseBase:
        defaults: dict[str, Any] = {
            "form_class": GuardedPasswordChangeForm,
            "success_url": reverse("admin:password_change_done", current_app=self.name),
            "extra_context": {**self.each_context(request), **(extra_context or {})},
        }
        if self.password_change_template is not None:
            defaults["template_name"] = self.password_change_template
        request.current_app = self.name
        if request.method != "POST" and password_locked(request, request.user):
            # A POST goes through the check (axes refuses it and restarts the cool-off); the form is not offered.
            return lockout_response(request)
        return GuardedPasswordChangeView.as_view(**defaults)(request)
