"""The Celery application; workers start with ``celery -A toolhub worker``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

app = Celery("toolhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
