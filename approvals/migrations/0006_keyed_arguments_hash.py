"""Pending requests' versions bound by the keyed approval hash (see toolhub 0022), so they can still be approved.

Only a binding that still holds is carried over; one that no longer matched stays refused. Reversed, the
keyed bindings that hold go back to plain digests, as the code before checks them.
"""

import importlib

from django.db import migrations

#: The bindings as toolhub's migration froze them (a module whose name starts with a digit is imported so).
_frozen = importlib.import_module("toolhub.migrations.0022_keyed_approval_hashes")


def rebind_pending_requests(apps, schema_editor, binding=_frozen.rebound):  # noqa: ANN001, ANN201 - migration signature
    requests = apps.get_model("approvals", "ApprovalRequest").objects.filter(status="pending")
    for request in requests.select_related("call").iterator():
        bound = binding(request.arguments_hash, request.tool_name, request.call.tool_version, request.arguments)
        if bound is not None:
            requests.filter(pk=request.pk).update(arguments_hash=bound)


def unbind_pending_requests(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    rebind_pending_requests(apps, schema_editor, binding=_frozen.unbound)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0005_argument_versions"),
        ("toolhub", "0022_keyed_approval_hashes"),
    ]

    operations = [migrations.RunPython(rebind_pending_requests, unbind_pending_requests)]
