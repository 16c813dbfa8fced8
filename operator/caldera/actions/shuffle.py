"""shuffle: evict the running tasks the victim-choosing plugins name (tdm, rescheduling).

Follows Volcano's ``shuffle`` action (``pkg/scheduler/actions/shuffle/shuffle.go``, ``Execute``):
every Running task of every job is a candidate; the plugins' ``VictimTasks`` functions pick
(the union within a tier, the first tier that picks any winning), the guards (pdb) drop what a
disruption budget forbids, and each victim is evicted with reason ``shuffle``. The action has no
policy of its own: without a plugin that picks victims it evicts nothing.
"""

from __future__ import annotations

from typing import ClassVar

from caldera.api.task import TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Action, NoArgs

__all__ = ["ShuffleAction"]

REASON = "shuffle"


class ShuffleAction(Action[NoArgs]):
    name: ClassVar[str] = "shuffle"

    def execute(self, ssn: SessionView) -> None:
        if not ssn.victim_tasks_point:
            return
        running = [  # another instance's jobs are its to move
            task
            for job in ssn.jobs.values()
            if not job.foreign
            for task in job.tasks_in(TaskStatus.RUNNING)
        ]
        victims = ssn.victim_tasks(running)
        if not victims:
            return
        stmt = ssn.statement()
        for task in victims:
            if task.status is TaskStatus.RUNNING:  # a plugin may name a task twice
                stmt.evict(task, REASON)
        stmt.commit()
