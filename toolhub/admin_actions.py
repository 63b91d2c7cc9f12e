"""Admin actions that ask for a comment first: one intermediate page and one mixin for every such action.

Rejecting approval requests and resolving compensations by hand both need a few words from the
operator before they act on the selected rows. :class:`CommentActionMixin` renders the confirmation
page (``admin/toolhub/action_with_comment.html``: what will be acted on, the form, confirm or go
back) until the form is valid, then lets the action run with the cleaned data.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

__all__ = ["CommentActionMixin", "CommentActionPage"]


class CommentActionPage:
    """What the confirmation page of one action shows: the words around the form and the rows acted on."""

    def __init__(
        self,
        *,
        title: str,
        intro: str,
        table: str,
        submit: str,
        hidden: Mapping[str, Any] | None = None,
    ) -> None:
        self.title, self.intro, self.table, self.submit = title, intro, table, submit
        self.hidden = dict(hidden or {})


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
        """``(form, None)`` once the operator confirmed with a valid form; ``(None, page)`` to show until then."""
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
            "selected": [getattr(item, "pk", item) for item in selected],
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        request.current_app = self.admin_site.name  # type: ignore[attr-defined]
        return None, TemplateResponse(request, "admin/toolhub/action_with_comment.html", context)
