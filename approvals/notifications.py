"""E-mail to the people who may decide a request, when it arrives and when it escalates (beside the webhook).

Only approvers whose approval would count are written to (``approvals.selectors.approvers_still_counting``: the
decide permission, the request's tenant, its approver group or, after escalation, the fallback group; not who
approved this round already, unless the approvals standing reach the quorum: then those approvers, whose
confirmation releases the call), one message each so that no one learns who else was asked. The message names the
tool, tenant, risk, reason and the approvals still needed, and links to the request; it never carries the
arguments (they may be sensitive). Each value is written on its own line as one line (``visible_line``): a code
rule's reason quotes the model's arguments, whose line breaks would otherwise forge lines (a second link).
"""

import logging
import smtplib

from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from approvals.deciders import RoundStanding, round_standing
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import approvers_still_counting
from toolhub.conf import toolhub_settings
from toolhub.site_paths import console_link
from toolhub.visible import visible_line

__all__ = ["approval_email_approvers", "EMAIL_EVENTS"]

logger = logging.getLogger(__name__)

#: The events that write to approvers, and the subject's first words for each.
EMAIL_EVENTS = {"approval.requested": "Approval needed", "approval.escalated": "Escalated, approval needed"}


def approval_email_approvers(*, request_id: int, event: str) -> int:
    """Write to every approver of a still-pending request; return how many messages were sent.

    A failure of the mail server is logged and not raised: the request stays on the desk (and the
    webhook is retried on its own), so a missing e-mail never blocks or loses a decision.
    """
    if event not in EMAIL_EVENTS or not toolhub_settings().APPROVAL_EMAILS:
        return 0
    request = (
        ApprovalRequest.objects.select_related("call", "requested_by", "approver_group", "escalation_group")
        .filter(pk=request_id)
        .first()
    )
    if request is None or request.status != ApprovalStatus.PENDING:
        return 0
    standing = round_standing(request)
    recipients = [user.email for user in approvers_still_counting(request, standing) if user.email]
    if not recipients:
        return 0
    subject = visible_line(
        f"[toolhub] {EMAIL_EVENTS[event]}: {request.tool_name} ({request.risk or 'unrated'}) in {request.tenant}"
    )
    body = _body(request, event, standing)
    messages = [EmailMessage(subject, body, settings.DEFAULT_FROM_EMAIL, [address]) for address in recipients]
    return _send_each(messages, request_id=request.pk, event=event)


def _send_each(messages: list[EmailMessage], *, request_id: int, event: str) -> int:
    """Send each message on its own over one connection; return how many went out.

    One approver's address refused by the mail server (a closed mailbox) fails that message alone: sent as one batch,
    the first failure ended it and everyone after went unmailed. Failures are logged, never raised.
    """
    connection = get_connection()
    try:
        connection.open()
    except Exception as exc:  # noqa: BLE001 - any mail backend's failure: logged, never in the decision's way
        logger.error("Could not e-mail the approvers of approval request %s (%s): %s", request_id, event, _failure(exc))
        return 0
    sent = 0
    try:
        for message in messages:
            try:
                sent += connection.send_messages([message]) or 0
            except Exception as exc:  # noqa: BLE001 - this approver's message only; the next ones still go out
                logger.error(
                    "Could not e-mail an approver of approval request %s (%s): %s", request_id, event, _failure(exc)
                )
    finally:
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - a server gone at QUIT: what was sent is sent
            logger.warning("Could not close the mail connection after approval request %s", request_id)
    return sent


def _failure(exc: Exception) -> str:
    """A mail failure as the log may keep it: its type and SMTP codes, never its text.

    The text of a refusal names the refused addresses (approvers of any tenant, in a shared log) and repeats the mail
    server's reply; the type and codes say what an operator needs (``SMTPRecipientsRefused 550``).
    """
    codes: list[int] = []
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = sorted({int(code) for code, _ in exc.recipients.values()})
    elif isinstance(exc, smtplib.SMTPResponseException):
        codes = [int(exc.smtp_code)]
    return " ".join([type(exc).__name__, *map(str, codes)])


def _body(request: ApprovalRequest, event: str, standing: RoundStanding) -> str:
    link = console_link("admin:approvals_approvalrequest_change", args=[request.pk])
    requester = request.requested_by.get_username() if request.requested_by else "-"
    lines = [
        "A tool call waits for your decision."
        if event == "approval.requested"
        else "A tool call has waited too long and now waits for your group's decision.",
        "",
        f"Tool:        {visible_line(request.tool_name)}",
        f"Tenant:      {visible_line(request.tenant or '-')}",
        f"Risk:        {visible_line(request.risk or '-')}",
        f"Why:         {visible_line(request.reason)}",
        f"Asked by:    {visible_line(requester)} (agent {visible_line(request.agent_name or '-')})",
        f"Approvals:   {standing.remaining} of {standing.needed} still needed (round {request.round})",
        f"Expires at:  {request.expires_at.isoformat(timespec='seconds')}",
        "",
        f"Open it on the approval desk to read the arguments and decide: {link}",
    ]
    return "\n".join(lines) + "\n"
