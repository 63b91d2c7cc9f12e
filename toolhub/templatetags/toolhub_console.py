"""Template tags of the console: the dashboard, the audit chain's status, the console's stylesheet, ``visible``."""

from typing import Any

from django import template
from django.templatetags.static import static
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from toolhub.admin_audit_export import EXPORT_PERMISSION
from toolhub.audit_console import audit_chain_status
from toolhub.audit_export_key import PublicKeyText, export_signing_key, public_key_text
from toolhub.audit_keys import retired_keys
from toolhub.checkpoint_signature import CheckpointKeyError, export_public_key
from toolhub.dashboard import dashboard
from toolhub.visible import shown, shown_markup

register = template.Library()


@register.filter
def visible(value: Any) -> Any:
    """Text with its invisible and bidi characters written out (``toolhub.visible``); safe HTML as it is."""
    return shown(value)


@register.filter(is_safe=True)
def visible_markup(value: Any) -> Any:
    """``visible`` for safe HTML too (a message's link): its invisible characters written out, the markup kept."""
    return shown_markup(value)


@register.simple_tag
def toolhub_console_css() -> SafeString:
    return format_html('<link rel="stylesheet" href="{}">', static("toolhub/audit.css"))


@register.inclusion_tag("admin/toolhub/chain_status.html", takes_context=True)
def toolhub_chain_status(context: template.Context) -> dict[str, Any]:
    request = context.get("request")
    return _chain_status(context, getattr(request, "user", None))


def _chain_status(context: template.Context, user: Any) -> dict[str, Any]:
    """The trail's status for ``user``, with what its "Verify now" forms post (CSRF token, the page to return to)."""
    request = context.get("request")
    may_export = bool(user and user.has_perm(EXPORT_PERMISSION))
    return {
        "status": audit_chain_status(user),
        "verify_url": reverse("admin:toolhub_audit_verify"),
        # "Export trail": a tenant's own chains as a file that verifies offline (toolhub.audit_export)
        "export_url": reverse("admin:toolhub_audit_export") if may_export else "",
        # the public key that checks an export's header (audit_file_verify --public-key); it cannot sign
        "export_key": _export_key() if may_export else None,
        "retired_export_keys": _retired_export_keys() if may_export else [],
        "csrf_token": context.get("csrf_token"),
        # the page without its query: the form never echoes what a crafted URL put there
        "next": request.path if request is not None else "",
    }


def _export_key() -> PublicKeyText | None:
    """The export public key as auditors copy it; None when no checkpoint key is set (exports are unsigned)."""
    try:
        return public_key_text(export_public_key())
    except CheckpointKeyError:
        return None


def _retired_export_keys() -> list[tuple[PublicKeyText, int | None]]:
    """The public keys of retired checkpoint keys, each with the last checkpoint it is valid for (none when unset)."""
    try:
        retired = retired_keys()
    except CheckpointKeyError:
        return []
    return [(public_key_text(export_signing_key(key.secret).public_key()), key.through) for key in reversed(retired)]


@register.inclusion_tag("admin/toolhub/dashboard.html", takes_context=True)
def toolhub_dashboard(context: template.Context) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.has_perm("toolhub.view_toolcall"):
        return {"board": None}
    return {"board": dashboard(user), **_chain_status(context, user)}
