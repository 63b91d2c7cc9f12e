"""Rolling a run back with its subagents: the run's own saga and the sagas of its descendant runs, any depth.

A run's saga holds only the run's own calls; what a subagent did is its child run's, in the child's saga
(``agents_app.subagents``). Undoing a run's work undoes its children's too, so a rollback asked for a run
asks each saga of its tree through ``saga_rollback``: each compensates its own steps newest first, each
audited as ``saga.rollback_requested`` (a descendant's naming the run asked for, ``through_run``). The
sagas run side by side; nothing is compensated twice (a saga already rolled back has nothing left). The
tree is walked here because ``toolhub.sagas`` knows nothing of runs. A run's children are always of its
user and tenant (``Subagent``); a row of another tenant is never followed all the same.
"""

import uuid
from dataclasses import dataclass, field

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from agents_app.models import AgentRun
from toolhub.sagas.models import RollbackTrigger, Saga
from toolhub.sagas.records import lock_sagas
from toolhub.sagas.services import NothingToCompensateError, saga_rollback

__all__ = ["RunSagas", "run_descendant_ids", "run_sagas", "run_rollback_with_subagents"]

NOTHING_TO_ROLL_BACK = (
    "Nothing to roll back: no completed step of this run or of its subagents' runs has a compensation "
    "(declare one with compensate_with= or @tool.compensation)."
)


@dataclass
class RunSagas:
    """A run's own saga (``None`` when it never had a compensable step) and its descendants' sagas."""

    run: AgentRun
    saga: Saga | None
    subagent_sagas: list[Saga] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.saga is None and not self.subagent_sagas


def run_descendant_ids(run: AgentRun) -> list[uuid.UUID]:
    """The ids of ``run``'s descendant runs in its tenant, parents before children (one query per level)."""
    found: list[uuid.UUID] = []
    seen = {run.id}
    level = [run.id]
    while level:
        children = AgentRun.objects.filter(parent_run_id__in=level, tenant=run.tenant).order_by("depth", "created_at")
        level = [pk for pk in children.values_list("id", flat=True) if pk not in seen]
        seen.update(level)
        found += level
    return found


def run_sagas(run: AgentRun) -> RunSagas:
    """What ``GET /runs/{id}/rollback/`` shows: the run's saga and its descendants', compensations prefetched."""
    ids = [run.id, *run_descendant_ids(run)]
    sagas = Saga.objects.filter(run_id__in=ids, tenant=run.tenant).prefetch_related("compensations", "rollbacks")
    by_run = {saga.run_id: saga for saga in sagas}
    return RunSagas(run=run, saga=by_run.get(run.id), subagent_sagas=[by_run[pk] for pk in ids[1:] if pk in by_run])


def run_rollback_with_subagents(*, run: AgentRun, actor: str, by: AbstractBaseUser | None = None) -> RunSagas:
    """Roll back ``run``'s saga and its descendants' now; the sagas that were (or are being) rolled back.

    Refused (``NothingToCompensateError``, 409) only when none of them has a step left to compensate. One
    transaction: the sagas' rows are locked first, in id order as every lock of several sagas is (``lock_sagas``),
    each rollback starts once all are asked.
    """
    with transaction.atomic():
        descendants = run_descendant_ids(run)
        lock_sagas(Saga.objects.filter(run_id__in=[run.id, *descendants], tenant=run.tenant))
        own = saga_rollback(
            saga_key=str(run.id),
            run_id=run.id,
            tenant=run.tenant,
            actor=actor,
            trigger=RollbackTrigger.ON_DEMAND,
            by=by,
        )
        rolled: list[Saga] = []
        for child_id in descendants:
            rollback = saga_rollback(
                saga_key=str(child_id),
                run_id=child_id,
                tenant=run.tenant,
                actor=actor,
                trigger=RollbackTrigger.ON_DEMAND,
                through_run=run.id,
                by=by,
            )
            if rollback is not None:
                rolled.append(rollback.saga)
        if own is None and not rolled:
            raise NothingToCompensateError(NOTHING_TO_ROLL_BACK)
    saga = own.saga if own is not None else Saga.objects.filter(key=str(run.id), tenant=run.tenant).first()
    for each in [saga, *rolled]:
        if each is not None:
            each.refresh_from_db()
    return RunSagas(run=run, saga=saga, subagent_sagas=rolled)
