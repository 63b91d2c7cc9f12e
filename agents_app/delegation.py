"""Keep the runs' recorded delegators (``AgentRun.delegated_by``) naming their ancestors' agents as they are named now.

A child records the names of the agents of the runs that started it, root first, so that an operator's deny to any
of them holds in it (``toolhub.authorization.CallPrincipal.delegated_by``); grants name agents by name. An agent
renamed while such a tree runs would leave its descendants bound by its old name (and by a deny to whichever agent
takes that name next) and free of a deny given under its new one, while its own runs read the new name.
"""

import uuid

from django.db import connection
from django.db.models import Q

from agents_app.models import Agent, AgentRun
from toolhub.models import Tenant

__all__ = ["delegations_renamed", "delegators_held"]


def delegators_held(parent: AgentRun, agent_id: int) -> bool:
    """Share-lock the agents a child of ``parent`` names until commit; whether its own agent (``agent_id``) is there.

    A rename renames the agent in the chains of the runs it finds below its runs, in its save's transaction, which
    holds the agent's row: a child started meanwhile is not among them (not committed) and would read the old name
    (not committed either). Taken before the parent's row is locked and read, this lock waits for a rename in flight
    (the parent's chain and agent, read after it, carry the new names), and a rename coming after it waits for the
    child's commit, then finds the child. Found by name, as the chain holds names: a row renamed in flight is waited
    for even though its new name no longer matches. The child's own agent is held too: a deletion in flight (an
    agent without runs is not protected) is waited for and answered ``False``, and one coming after waits for the
    child, whose run then protects the agent. SQLite runs one writing transaction at a time: nothing to hold.
    """
    if connection.vendor != "postgresql":
        return Agent.objects.filter(pk=agent_id).exists()
    names = list(parent.delegated_by or [])
    in_tenant = Q(tenant__isnull=True) | Q(tenant_id__in=Tenant.objects.filter(slug=parent.tenant).values("pk"))
    named = Q(pk__in=[parent.agent_id, agent_id]) | (Q(name__in=names) & in_tenant if names else Q(pk__in=[]))
    sql, params = Agent.objects.filter(named).order_by("pk").values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} FOR SHARE", params)
        return any(pk == agent_id for (pk,) in cursor.fetchall())


def delegations_renamed(agent_id: int, new_name: str) -> int:
    """Rename agent ``agent_id`` in the ``delegated_by`` of every run started under one of its runs; how many changed.

    The run at depth ``d`` stands at position ``d`` of each of its descendants' lists. One read per level of the
    trees below the agent's runs that have children (depth is bounded by the subagent limits), one bulk write.
    """
    starts = AgentRun.objects.filter(agent_id=agent_id, children__isnull=False).values_list("id", "depth").distinct()
    level: dict[uuid.UUID, set[int]] = {run_id: {depth} for run_id, depth in starts}
    positions: dict[uuid.UUID, set[int]] = {}  # a descendant -> its list's positions that name the agent
    found: dict[uuid.UUID, AgentRun] = {}
    while level:
        children = AgentRun.objects.filter(parent_run_id__in=list(level)).only(
            "id", "parent_run_id", "agent_id", "depth", "delegated_by"
        )
        below: dict[uuid.UUID, set[int]] = {}
        for child in children:
            assert child.parent_run_id is not None
            positions.setdefault(child.pk, set()).update(level[child.parent_run_id])
            found[child.pk] = child
            # a run of the agent under one of its own (a nested start) names it for its children at its depth too
            below[child.pk] = positions[child.pk] | ({child.depth} if child.agent_id == agent_id else set())
        level = below
    changed = []
    for run_id, child in found.items():
        chain = list(child.delegated_by or [])
        renamed = [new_name if index in positions[run_id] else name for index, name in enumerate(chain)]
        if renamed != chain:
            child.delegated_by = renamed
            changed.append(child)
    AgentRun.objects.bulk_update(changed, ["delegated_by"], batch_size=500)
    return len(changed)
