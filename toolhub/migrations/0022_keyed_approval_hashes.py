"""Approval bindings keyed by the server (HMAC over SECRET_KEY) instead of a plain SHA-256 of the arguments.

Calls that still wait for a decision or a worker are bound again under the keyed hash, so an approval given
before the upgrade still runs its call; only a binding that still holds (the plain digest of the row as it
is) is carried over, so one that no longer matched stays refused. Settled calls keep the hash they were
decided under, except failed and needs-attention ones, which a saga may queue again (a compensation's
retry is checked like any run); the approvals app rebinds its pending requests the same way. Reversed,
the keyed bindings that hold go back to plain digests, as the code before checks them.
"""

import hashlib


from django.conf import settings
from django.db import migrations
from django.utils.crypto import salted_hmac

from toolhub.audit_hash import canonical_json

#: ``toolhub.pipeline.APPROVAL_HASH_SALT`` as of this migration (written here so the migration never changes).
SALT = "toolhub.approval_hash"
#: Calls whose binding is checked again: waiting for a decision or a worker, or queued again by a saga.
WAITING = ("pending_approval", "queued", "running", "awaiting_result", "failed", "needs_attention")


def rebound(plain: str, tool_name: str, tool_version: str, arguments: object) -> str | None:
    """The keyed binding of what ``plain`` (a digest as bound before) binds, or ``None`` if it binds something else."""
    material = canonical_json({"tool": tool_name, "version": tool_version, "arguments": arguments})
    if hashlib.sha256(material.encode()).hexdigest() != plain:
        return None  # it no longer matched: it stays refused, as the worker or the release would refuse it
    return salted_hmac(SALT, material, secret=settings.SECRET_KEY, algorithm="sha256").hexdigest()


def unbound(keyed: str, tool_name: str, tool_version: str, arguments: object) -> str | None:
    """Reversed: the plain digest of what ``keyed`` binds, or ``None`` if it binds something else."""
    material = canonical_json({"tool": tool_name, "version": tool_version, "arguments": arguments})
    if salted_hmac(SALT, material, secret=settings.SECRET_KEY, algorithm="sha256").hexdigest() != keyed:
        return None
    return hashlib.sha256(material.encode()).hexdigest()


def rebind_waiting_calls(apps, schema_editor, binding=rebound):  # noqa: ANN001, ANN201 - migration signature
    calls = apps.get_model("toolhub", "ToolCall").objects.filter(status__in=WAITING).exclude(approval_hash="")
    for call in calls.only("id", "tool_name", "tool_version", "arguments", "approval_hash").iterator():
        bound = binding(call.approval_hash, call.tool_name, call.tool_version, call.arguments)
        if bound is not None:
            calls.filter(pk=call.pk).update(approval_hash=bound)


def unbind_waiting_calls(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    rebind_waiting_calls(apps, schema_editor, binding=unbound)


class Migration(migrations.Migration):
    dependencies = [("toolhub", "0021_tenant_audit_chain_base")]

    operations = [migrations.RunPython(rebind_waiting_calls, unbind_waiting_calls)]
