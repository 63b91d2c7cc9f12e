"""Side effects of test tools, counted per call to prove at-most-once execution."""

from django.db import models


class SideEffect(models.Model):
    """One execution of a test tool."""

    call_id = models.CharField(max_length=64, db_index=True)
    tool = models.CharField(max_length=100)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)


class PlainRecord(models.Model):
    """A bare row of about a call's size: the baseline the benchmarks compare governed calls with."""

    name = models.CharField(max_length=100)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
