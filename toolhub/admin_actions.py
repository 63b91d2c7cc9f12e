"""Admin actions that ask for a comment first: one intermediate page and one mixin for every such action.

Rejecting approval requests and resolving compensations by hand both need a few words from the
operator before they act on the selected rows. :class:`CommentActionMixin` renders the confirmation
page (``admin/toolhub/action_with_comment.html``: what will be acted on, the form, confirm or go
back) until the form is valid, then lets the action run with the cleaned data.

What the page showed of its rows, to which the action is bound, travels in one field (``toolhub.admin_marks``);
the rows themselves travel as Django's ``_selected_action``, one field each, so a page lists at most
``rows_per_confirmation`` of them: Django refuses a POST of more fields with a bare 400.

Every list of the console (``ToolhubAdminSite.admin_view``), not only these, checks the posted row ids first
(:func:`rows_checked`): Django's own actions (``delete_selected``) filter by them too.
"""

from collections.abc import Callable, Iterable, Mapping
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponseBase, HttpResponseRedirect
from django.template.response import TemplateResponse

from toolhub.admin_marks import marks_field, seen_field

__all__ = ["CommentActionMixin", "CommentActionPage", "malformed_row", "rows_checked", "rows_per_confirmation"]

#: The page's own fields besides its form's and its rows': the CSRF token, ``action``, ``apply``.
_PAGE_FIELDS = 3


class CommentActionPage:
    """What the confirmation page of one action shows: the words around the form and the rows acted on.

    ``marks``: what the page shows of each row, to which the action is bound row by row (``toolhub.admin_marks``),
    carried in one hidden field however many rows. ``seen``: the marks of a set the action takes all or nothing,
    carried as their digest (``seen_field``): its rows grow with the data, not the selection, and one word always
    posts back.
    """

    def __init__(
        self,
        *,
        title: str,
        intro: str,
        table: str,
        submit: str,
        marks: Iterable[str] | None = None,
        seen: Iterable[str] | None = None,
    ) -> None:
        if marks is not None and seen is not None:
            raise ValueError("A page binds its rows one by one (marks) or as a set (seen), not both.")
        self.title, self.intro, self.table, self.submit = title, intro, table, submit
        self.hidden: Mapping[str, str] = (
            marks_field(marks) if marks is not None else seen_field(seen) if seen is not None else {}
        )


def rows_per_confirmation(form_class: type[forms.Form], page: CommentActionPage) -> int | None:
    """How many rows one confirmation page may list and still be posted (``None``: no limit is set)."""
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    if limit is None:
        return None
    return limit - _PAGE_FIELDS - len(page.hidden) - len(form_class.base_fields)


def _too_many(selected: int, most: int) -> str:
    """Why a selection of ``selected`` rows gets no confirmation page, when one page posts back at most ``most``."""
    if most < 1:
        # Not even one row fits: no selection would do, so asking for a smaller one would mislead.
        return (
            f"No confirmation page fits DATA_UPLOAD_MAX_NUMBER_FIELDS ({settings.DATA_UPLOAD_MAX_NUMBER_FIELDS}): "
            f"it is {1 - most} too small for a page of one row. Nothing was done."
        )
    return f"{selected} rows are selected; select at most {most} for one confirmation. Nothing was done."


def malformed_row(model: type[Model], request: HttpRequest) -> str | None:
    """The first selected row id posted that is no primary key of ``model`` (garbled, empty, out of range)."""
    field = model._meta.pk
    assert field is not None
    for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
        try:
            field.run_validators(field.to_python(value))
        except ValidationError:
            return str(value)[:40]
    return None


def rows_checked(model_admin: Any, view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """``view`` (a list's), answering a posted row id that is no primary key with a message, nothing done.

    Django's ``filter(pk__in=...)`` would raise on it (a 500) in any action, its own ``delete_selected`` included: a
    page never posts one, so the form was altered or cut short. The list again, as after an action that failed.
    """

    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method == "POST" and (malformed := malformed_row(model_admin.model, request)) is not None:
            model_admin.message_user(
                request,
                f"{malformed!r} names no row of this list; nothing was done. Select the rows again.",
                messages.ERROR,
            )
            return HttpResponseRedirect(request.get_full_path())
        return view(request, *args, **kwargs)

    return checked


class CommentActionMixin:
    """Mixed into a ``ModelAdmin``: an action calls :meth:`comment_form_or_page` and acts once it gets a form.

    Its actions get the rows the operator ticked (or listed on the confirmation page), read again from the
    admin's own rows (tenant-scoped), not narrowed by the list's filters: a row that left a filter since it was
    listed (a request a colleague decided meanwhile, a run that ended) reaches the action, which says what became
    of it, instead of vanishing without a word. "Select all" keeps the filtered list it names. The rows come
    with what the list reads with them (``list_select_related``), so a confirmation page costs no query per row.
    """

    def response_action(self, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        if not forms.BooleanField(required=False).clean(request.POST.get("select_across")):
            queryset = self.get_queryset(request)  # type: ignore[attr-defined]
            related = self.get_list_select_related(request)  # type: ignore[attr-defined]
            if related is True:
                queryset = queryset.select_related()
            elif related:
                queryset = queryset.select_related(*related)
        return super().response_action(request, queryset)  # type: ignore[misc]

    def comment_form_or_page(
        self,
        request: HttpRequest,
        form_class: type[forms.Form],
        *,
        action: str,
        selected: Iterable[Any],
        page: CommentActionPage,
    ) -> tuple[forms.Form | None, TemplateResponse | None]:
        """``(form, None)`` once the operator confirmed with a valid form; ``(None, page)`` to show until then.

        ``(None, None)`` when there are more rows than one page can post back: the operator is told to select fewer,
        and nothing is done.
        """
        rows = [getattr(item, "pk", item) for item in selected]
        most = rows_per_confirmation(form_class, page)
        if most is not None and len(rows) > most:
            self.message_user(request, _too_many(len(rows), most), messages.ERROR)  # type: ignore[attr-defined]
            return None, None
        form = form_class(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            return form, None
        context = {
            **self.admin_site.each_context(request),  # type: ignore[attr-defined]
            "opts": self.opts,  # type: ignore[attr-defined]
            "title": page.title,
            "page": page,
            "form": form,
            "action": action,
            "selected": rows,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        request.current_app = self.admin_site.name  # type: ignore[attr-defined]
        return None, TemplateResponse(request, "admin/toolhub/action_with_comment.html", context)
