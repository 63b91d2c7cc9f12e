"""Celery tasks of approvals: thin wrappers over services, acting on times stored in the database."""

from celery import shared_task

from approvals.notifications import approval_email_approvers
from approvals.unanswered import approvals_escalate_due, approvals_expire_due
from approvals.webhooks import webhook_deliver, webhooks_dispatch_due


@shared_task(name="approvals.tasks.expire_approvals_task", ignore_result=True)
def expire_approvals_task() -> None:
    """Expire overdue requests, escalate waiting ones, hand due webhook deliveries to workers."""
    approvals_expire_due()
    approvals_escalate_due()
    webhooks_dispatch_due()


@shared_task(name="approvals.tasks.deliver_webhook_task", ignore_result=True)
def deliver_webhook_task(delivery_id: int) -> None:
    """Deliver one webhook notification (a failure is retried later by the periodic task)."""
    webhook_deliver(delivery_id=delivery_id)


@shared_task(name="approvals.tasks.email_approvers_task", ignore_result=True)
def email_approvers_task(request_id: int, event: str) -> None:
    """E-mail the approvers of a request that arrived or escalated."""
    approval_email_approvers(request_id=request_id, event=event)
