"""Celery tasks of approvals."""

from celery import shared_task

from approvals.services import approvals_expire_due


@shared_task(name="approvals.tasks.expire_approvals_task", ignore_result=True)
def expire_approvals_task() -> None:
    """Expire pending approval requests whose deadline passed (times live in the database)."""
    approvals_expire_due()
