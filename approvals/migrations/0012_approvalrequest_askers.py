"""Who asked for a call becomes everyone who did (``askers``): the former ``asked_by`` is copied in, then dropped."""

from typing import Any

from django.conf import settings
from django.db import migrations, models
from django.db.migrations.exceptions import IrreversibleError
from django.db.models import Count, OuterRef, Subquery


def copy_asked_by(apps: Any, schema_editor: Any) -> None:
    """Each request's former ``asked_by`` (who rolled back) becomes its first asker: still barred from deciding it."""
    requests = apps.get_model("approvals", "ApprovalRequest")
    through = requests.askers.through
    rows = requests.objects.filter(asked_by__isnull=False).values_list("pk", "asked_by_id")
    through.objects.bulk_create(
        [through(approvalrequest_id=pk, user_id=user_id) for pk, user_id in rows.iterator()], batch_size=1000
    )


def copy_back(apps: Any, schema_editor: Any) -> None:
    """Reversed: the first asker (the rollback's, when there was one) goes back into ``asked_by``.

    A pending request with more askers is refused first: the older code would let the others (who retried) decide it
    alone. A decided one keeps its first asker (no one decides it again; the others are not kept).

    One UPDATE, each request written once: a row written again in this transaction (one UPDATE per asker) left
    PostgreSQL's deferred foreign-key checks pending, and the restored column's index then could not be created.
    """
    requests = apps.get_model("approvals", "ApprovalRequest")
    through = requests.askers.through
    shared = requests.objects.filter(status="pending").annotate(asked=Count("askers")).filter(asked__gt=1)
    count = shared.count()
    if count:
        shown = ", ".join(f"#{pk}" for pk in shared.order_by("pk").values_list("pk", flat=True)[:10])
        raise IrreversibleError(
            f"approvals 0012 cannot be reversed: {count} pending approval request{'s' if count > 1 else ''} "
            f"({shown}{', ...' if count > 10 else ''}) asked for by more than one person, where the older schema "
            "holds one: the others could then decide alone. Approve, reject or cancel them first, then migrate back."
        )
    first = through.objects.filter(approvalrequest_id=OuterRef("pk")).order_by("pk").values("user_id")[:1]
    requests.objects.filter(pk__in=through.objects.values("approvalrequest_id")).update(asked_by_id=Subquery(first))


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0011_compensation_asked_by"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="approvalrequest",
            name="askers",
            field=models.ManyToManyField(
                blank=True,
                help_text="Who asked for this call in its user's name (a compensation's: who rolled the saga back, "
                "who retried it or chose to compensate its held step); like the requester, they never decide it.",
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="asked by",
            ),
        ),
        migrations.RunPython(copy_asked_by, copy_back),
        migrations.RemoveField(model_name="approvalrequest", name="asked_by"),
    ]
