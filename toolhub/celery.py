"""The Celery application; workers start with ``celery -A toolhub worker``."""

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

app = Celery("toolhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _audit_checkpoint_interval(sender: Celery, **kwargs: Any) -> None:
    """Beat signs checkpoints every ``TOOLHUB["AUDIT_CHECKPOINT_SECONDS"]``, wherever it was set (``toolhub.beat``)."""
    from toolhub.beat import audit_checkpoint_schedule_apply

    audit_checkpoint_schedule_apply(sender.conf.beat_schedule)


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(sender: Any = None, **kwargs: Any) -> None:
    """Treat each task like a web request: keep the connection for ``CONN_MAX_AGE``, drop a broken one.

    Celery's Django fixup would close the connection before and after every task; ``CELERY_DB_REUSE_MAX``
    (settings.py) stops that, and this does what Django does around each request instead: close the
    connection when it is older than ``DATABASE_CONN_MAX_AGE`` (0: after every task, as before) or when
    an error left it unusable, and mark it for a health check before its next use (``CONN_HEALTH_CHECKS``),
    so a connection the server terminated between tasks is replaced, not handed to the next task.
    Eager tasks run inside the caller's request and transaction, so their connection is left alone.
    """
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
