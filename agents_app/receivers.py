"""Wakes a run when one of its calls settles, or its saga's finished rollback opens again; the loop decides the rest.

In a tool worker the wake-up runs right there once the task's own work is done (no second broker hop
for the step that follows a turn's last call); anywhere else (an operator's rejection, an external
result, a cancellation) it is an ``advance_run_task`` message. Both end in ``run_advance``, whose row
lock, lease and step token make a wake-up that finds nothing to do harmless, and the sweep wakes a run
whose wake-up was lost (a worker killed between settling the call and advancing the run).
"""

import functools
import logging
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver

from toolhub.models import TenantMembership
from toolhub.signals import (
    after_task,
    call_askers,
    call_settled,
    once_for_calls_settled_together,
    rollback_reopened,
    saga_key_reserved,
)

logger = logging.getLogger(__name__)
User = get_user_model()


@receiver(call_settled, dispatch_uid="agents_app.advance_on_settle")
def _on_call_settled(sender: type, call_id: uuid.UUID, run_id: uuid.UUID | None, **kwargs: Any) -> None:
    if run_id is None:
        return
    # Many calls settled together (a cancelled run's withdrawn ones): their run is woken once.
    if not once_for_calls_settled_together(("agents_app.wake", run_id), functools.partial(_wake, run_id)):
        _wake(run_id)


def _wake(run_id: uuid.UUID) -> None:
    """Advance the run in this worker after its task (``after_task``), else through an ``advance_run_task``."""
    if not after_task(lambda seconds_left: _advance_here(run_id, seconds_left)):
        _send_advance(run_id)


@receiver(rollback_reopened, dispatch_uid="agents_app.advance_on_rollback_reopened")
def _on_rollback_reopened(sender: type, run_id: uuid.UUID, **kwargs: Any) -> None:
    """A run's finished rollback was opened again: woken, the run tells its conversation once it finishes again."""
    _wake(run_id)


@receiver(call_askers, dispatch_uid="agents_app.run_retriers_ask")
def _run_retriers_ask(sender: type, call: Any, **kwargs: Any) -> list[int]:
    """Who retried the call's run or one of its ancestors: they set it in motion, so they never decide it."""
    if call.run_id is None:
        return []
    from agents_app.selectors import run_retriers

    return run_retriers(call.run_id)


@receiver(pre_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="agents_app.cancel_runs_of_deleted_users")
def _cancel_runs_of_deleted_user(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Deleting a user empties their runs' link to them: first the runs still going end, so none goes on for nobody."""
    from agents_app.cancelling import GOVERNANCE_ACTOR, runs_cancel_of_user

    runs_cancel_of_user(
        user_id=instance.pk, actor=GOVERNANCE_ACTOR, reason="its user was deleted; nothing more runs in their name."
    )


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="agents_app.cancel_runs_of_deactivated_users")
def _cancel_runs_of_changed_user(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    """A user deactivated (or no longer a superuser acting everywhere): their runs where they may not act end now.

    A login's ``last_login`` write is skipped; the loop checks the same standing before every model turn anyway.
    """
    if kwargs.get("created") or (update_fields and set(update_fields) <= {"last_login"}):
        return
    _cancel_runs_without_standing([instance.pk])


@receiver(post_delete, sender=TenantMembership, dispatch_uid="agents_app.cancel_runs_of_departed_members")
def _cancel_runs_of_departed_member(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A user removed from a tenant: their runs there end now, unless they still act in it another way."""
    _cancel_runs_without_standing([instance.user_id])


@receiver(pre_save, sender=TenantMembership, dispatch_uid="agents_app.note_moved_members")
def _note_former_member(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Remember who a membership named before this save: moving it (another user or tenant) removes them."""
    stored = TenantMembership.objects.filter(pk=instance.pk).values_list("user_id", flat=True)
    instance._former_user_id = stored.first() if instance.pk is not None else None


@receiver(post_save, sender=TenantMembership, dispatch_uid="agents_app.cancel_runs_of_moved_members")
def _cancel_runs_of_moved_member(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    """A membership moved to another tenant or user: the former member's runs where they no longer stand end now."""
    former = getattr(instance, "_former_user_id", None)
    if not created and former is not None:
        _cancel_runs_without_standing([former])


@receiver(m2m_changed, sender=User.groups.through, dispatch_uid="agents_app.cancel_runs_on_group_change")
@receiver(m2m_changed, sender=User.user_permissions.through, dispatch_uid="agents_app.cancel_runs_on_perm_change")
@receiver(m2m_changed, sender=Group.permissions.through, dispatch_uid="agents_app.cancel_runs_on_group_perms")
def _cancel_runs_on_lost_permission(
    sender: Any, instance: Any, action: str, pk_set: set[int] | None, **kwargs: Any
) -> None:
    """Groups or permissions taken away (``toolhub.cross_tenant`` lets one act in every tenant): runs end now.

    From either side of the relation (a user's groups, a group's members or permissions, a permission's holders),
    every user it may have touched is checked, as a removed membership's user is.
    """
    if action == "pre_clear":  # after the clear, who was related is no longer known
        instance._toolhub_cleared = _related_pks(sender, instance)
        return
    if action == "post_clear":
        pk_set = getattr(instance, "_toolhub_cleared", set())
    elif action != "post_remove":
        return
    _cancel_runs_without_standing(_touched_users(sender, instance, pk_set or set()))


def _related_pks(through: Any, instance: Any) -> set[int]:
    """The ids ``instance`` is related to through ``through`` (a many-to-many table between two models)."""
    source = next(f for f in through._meta.fields if f.is_relation and f.related_model is type(instance))
    target = next(f for f in through._meta.fields if f.is_relation and f is not source)
    return set(through.objects.filter(**{source.attname: instance.pk}).values_list(target.attname, flat=True))


def _touched_users(through: Any, instance: Any, pk_set: set[int]) -> list[int]:
    """The users whose groups or permissions one change of ``through`` (``pk_set`` on ``instance``) may have taken."""
    if isinstance(instance, User):
        return [instance.pk]
    if through is not Group.permissions.through:  # a group's members or a permission's users: ``pk_set`` are users
        return sorted(pk_set)
    groups = [instance.pk] if isinstance(instance, Group) else sorted(pk_set)
    return sorted(set(User.objects.filter(groups__in=groups).values_list("pk", flat=True)))


def _cancel_runs_without_standing(user_ids: list[int]) -> None:
    """End the runs of ``user_ids`` still going where they may no longer act (the loop would, at its next turn).

    Judged once the change commits, on what it leaves: one edit is several statements (``groups.set`` removes the
    old groups, then adds the new; the admin's user form saves the user, then its groups; an inline moves one
    membership, then adds another), and between them someone who keeps standing may seem to have none.
    """
    if user_ids:
        transaction.on_commit(functools.partial(_cancel_now, list(user_ids)), robust=True)


def _cancel_now(user_ids: list[int]) -> None:
    from agents_app.cancelling import GOVERNANCE_ACTOR, runs_cancel_without_standing

    for user_id in user_ids:
        runs_cancel_without_standing(user_id=user_id, actor=GOVERNANCE_ACTOR)


@receiver(saga_key_reserved, dispatch_uid="agents_app.run_saga_keys")
def _run_saga_key(sender: Any, key: str, tenant: str, **kwargs: Any) -> bool:
    """A run's id is its saga's key in its tenant: no direct call there may carry it, even before its first call."""
    from agents_app.models import AgentRun

    try:
        run_id = uuid.UUID(key)
    except ValueError:
        return False
    return AgentRun.objects.filter(pk=run_id, tenant=tenant).exists()


def _advance_here(run_id: uuid.UUID, seconds_left: float) -> None:
    """Advance the run in this worker if its step fits the task's remaining time; else send the agent task."""
    from agents_app.loop import STEP_LEASE_MARGIN_SECONDS, Advance, run_advance

    outcome = Advance.NO_TIME
    try:
        if seconds_left > STEP_LEASE_MARGIN_SECONDS:
            outcome = run_advance(run_id=run_id, seconds_left=seconds_left)
    except Exception:  # noqa: BLE001 - the agent task retries the step on its own budget
        logger.exception("run %s: advancing in the tool worker failed; sending advance_run_task", run_id)
        _send_advance(run_id)
        return
    if outcome is Advance.NO_TIME:
        logger.info("run %s: its step does not fit this tool task's time limit; sending advance_run_task", run_id)
        _send_advance(run_id)
    elif outcome is Advance.STEPPED:
        logger.info("run %s advanced in the worker that settled its last call", run_id)


def _send_advance(run_id: uuid.UUID) -> None:
    from agents_app.tasks import advance_run_task

    advance_run_task.delay(str(run_id))


@receiver(pre_save, sender="agents_app.Agent", dispatch_uid="agents_app.note_renamed_agents")
def _note_former_agent_name(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Remember the name an agent had before this save: its descendants' recorded delegators follow a rename."""
    stored = type(instance).objects.filter(pk=instance.pk).values_list("name", flat=True)
    instance._former_name = stored.first() if instance.pk is not None else None


@receiver(post_save, sender="agents_app.Agent", dispatch_uid="agents_app.rename_in_delegations")
def _rename_in_delegations(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    """An agent renamed: the runs started under its runs name it anew (``agents_app.delegation``).

    In this save's transaction, so a deny given under the new name holds in them as in the agent's own runs.
    """
    former = getattr(instance, "_former_name", None)
    if not created and former is not None and former != instance.name:
        from agents_app.delegation import delegations_renamed

        delegations_renamed(instance.pk, instance.name)
