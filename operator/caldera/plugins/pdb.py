"""pdb: preempt and reclaim never choose a victim set that breaks a PodDisruptionBudget.

Each budget allows a number of disruptions: its ``status.disruptionsAllowed`` as the disruption
controller wrote it, or, for a budget that has no status yet (manifests given to
``caldera simulate``), what the controller would compute from ``minAvailable`` /
``maxUnavailable`` and the running pods it selects (same namespace; an empty selector selects
them all, a missing one none). A victim is offered only while every budget selecting it still
allows one more disruption, counting the victims offered in the same call and the tasks already
evicted in this session (the plugin follows evictions and their undoing). The same rule guards
the shuffle action's victims.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import EventHandler, SessionView
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.points import PERMIT
from caldera.models.policy import PodDisruptionBudget

__all__ = ["PdbPlugin"]


def _selects(budget: PodDisruptionBudget, task: Task) -> bool:
    selector = budget.spec.selector
    return (
        budget.metadata.namespace == task.namespace
        and selector is not None
        and selector.matches(task.labels)
    )


class PdbPlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "pdb"

    def on_session_open(self, ssn: SessionView) -> None:
        budgets = ssn.snapshot.disruption_budgets
        if not budgets:
            return
        running = [
            t for row in ssn.nodes.tasks for t in row.values() if t.status is TaskStatus.RUNNING
        ]
        left = [b.allowed(sum(1 for t in running if _selects(b, t))) for b in budgets]
        covers: dict[str, list[int]] = {}

        def of(task: Task) -> list[int]:
            hit = covers.get(task.uid)
            if hit is None:
                hit = covers[task.uid] = [i for i, b in enumerate(budgets) if _selects(b, task)]
            return hit

        def allowed(candidates: Sequence[Task]) -> list[Task]:
            spare = list(left)
            out = []
            for task in candidates:
                mine = of(task)
                if all(spare[i] > 0 for i in mine):
                    for i in mine:
                        spare[i] -= 1
                    out.append(task)
            return out

        def victims(_: Task, candidates: Sequence[Task]) -> tuple[list[Task], int]:
            return allowed(candidates), PERMIT

        evicted: set[str] = set()

        def evict(task: Task) -> None:
            # a release (eviction) fires the deallocate handler with the task already releasing
            if task.status is TaskStatus.RELEASING and task.uid not in evicted:
                evicted.add(task.uid)
                for i in of(task):
                    left[i] -= 1

        def undo(task: Task) -> None:
            # a discarded eviction fires the allocate handler with the task back as it was
            if task.uid in evicted and task.status is not TaskStatus.RELEASING:
                evicted.discard(task.uid)
                for i in of(task):
                    left[i] += 1

        ssn.preemptable_point.add(self.name, victims)
        ssn.reclaimable_point.add(self.name, victims)
        ssn.victim_filter_point.add(self.name, allowed)
        ssn.event_handlers.add(self.name, EventHandler(allocate=undo, deallocate=evict))
