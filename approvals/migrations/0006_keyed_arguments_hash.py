"""Pending requests' versions bound by the keyed approval hash (see toolhub 0022), so they can still be approved.

Only a binding that still holds is carried over; one that no longer matched stays refused.
"""

import importlib

from django.db import migrations

#: The rebinding as toolhub's migration froze it (a module whose name starts with a digit is imported so).
rebound = importlib.import_module("toolhub.migrations.0022_keyed_approval_hashes").rebound


def rebind_pending_requests(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    requests = apps.get_model("approvals", "ApprovalRequest").objects.filter(status="pending")
    for request in requests.select_related("call").iterator():
        bound = rebound(request.arguments_hash, request.tool_name, request.call.tool_version, request.arguments)
        if bound is not None:
            requests.filter(pk=request.pk).update(arguments_hash=bound)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0005_argument_versions"),
        ("toolhub", "0022_keyed_approval_hashes"),
    ]

    operations = [migrations.RunPython(rebind_pending_requests, migrations.RunPython.noop)]
