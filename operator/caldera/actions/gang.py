"""gangpreempt and gangreclaim: Caldera's gang-aware victim search (Volcano 1.15's names).

``preempt`` and ``reclaim`` decide as Volcano's own actions do, task by task, first node that
works (:mod:`caldera.actions._walk`). These two actions serve the same jobs with the same rules
of who may evict whom, but choose victims as a gang scheduler should
(:mod:`caldera.actions._evict`): of the nodes where the preemptor could fit, the one whose victim
set is cheapest (a victim that would take its job below minMember counts as its whole gang,
then fewest pods, lowest priority), so a running gang is broken only when nothing cheaper
exists; and a job's evictions are committed only if the whole job can then start.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from caldera.actions._evict import (
    BoolArray,
    VictimTable,
    candidate_nodes,
    commit_with_victims,
    evict_for,
    make_room_for_job,
    starving_jobs,
    turns_by_queue_share,
)
from caldera.actions.preempt import PreemptArgs
from caldera.actions.reclaim import ReclaimArgs
from caldera.api.queue import Queue
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Action

__all__ = ["GangPreemptAction", "GangReclaimAction"]


class GangPreemptAction(Action[PreemptArgs]):
    name: ClassVar[str] = "gangpreempt"
    Args = PreemptArgs

    def execute(self, ssn: SessionView) -> None:
        jobs = starving_jobs(ssn, pending_too=self.args.pending_jobs)
        if not jobs:
            return
        table = VictimTable(ssn)
        limit = candidate_nodes(self.args, len(ssn.nodes))
        for job in jobs:
            same_queue = table.queue == table.queue_ids.get(job.queue, -2)
            others = same_queue & (table.job != table.job_id(job.uid))

            def eligible(task: Task, others: BoolArray = others) -> BoolArray | None:
                if task.spec.preemption_policy == "Never":
                    return None
                # a BestEffort preemptor never evicts a pod that requests resources
                return others & table.best_effort if task.best_effort else others

            make_room_for_job(
                ssn, table, job, eligible, ssn.preemptable, "gangpreempt", max_candidates=limit
            )
        self._within_jobs(ssn, table, limit)

    def _within_jobs(self, ssn: SessionView, table: VictimTable, limit: int) -> None:
        """A job's pending tasks evict its own running tasks of lower priority."""
        task_key = ssn.task_order_key()
        for job in starving_jobs(ssn, pending_too=self.args.pending_jobs):
            for task in sorted(job.placeable(), key=task_key):
                if task.spec.preemption_policy == "Never":
                    continue
                eligible = (table.job == table.job_id(job.uid)) & (table.priority < task.priority)
                if not eligible.any():
                    continue
                stmt = ssn.statement()
                got = evict_for(
                    ssn,
                    stmt,
                    table,
                    task,
                    eligible,
                    ssn.preemptable,
                    "gangpreempt",
                    max_candidates=limit,
                )
                if got:
                    commit_with_victims(ssn, stmt, job, got)
                else:
                    stmt.discard()


class GangReclaimAction(Action[ReclaimArgs]):
    name: ClassVar[str] = "gangreclaim"
    Args = ReclaimArgs

    def execute(self, ssn: SessionView) -> None:
        jobs = starving_jobs(ssn, pending_too=self.args.pending_jobs)
        if not jobs:
            return
        table = VictimTable(ssn)
        reclaimable_queue = np.array(
            [ssn.queues[q].reclaimable if q in ssn.queues else False for q in table.queue_ids],
            dtype=bool,
        )
        open_victims = np.append(reclaimable_queue, False)[table.queue]
        running = np.array([t.status is TaskStatus.RUNNING for t in table.tasks], dtype=bool)
        limit = candidate_nodes(self.args, len(ssn.nodes))
        for job in turns_by_queue_share(ssn, jobs):
            queue = ssn.queues[job.queue]
            if ssn.overused(queue):
                continue
            mine = table.queue_ids.get(job.queue, -2)
            others = open_victims & running & (table.queue != mine)

            def eligible(task: Task, others: BoolArray = others) -> BoolArray | None:
                return None if task.spec.preemption_policy == "Never" else others

            def may_grow(task: Task, queue: Queue = queue) -> bool:
                return ssn.preemptive(queue, task)

            make_room_for_job(
                ssn,
                table,
                job,
                eligible,
                ssn.reclaimable,
                "gangreclaim",
                max_candidates=limit,
                may_grow=may_grow,
            )
