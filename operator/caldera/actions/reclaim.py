"""reclaim: queues under their share take back what other queues hold beyond theirs.

As Volcano's reclaim: starving jobs (valid, past Pending) take turns by queue: the first queue in
queue order that is not overused serves its first job in job order and goes back in line keyed by
its share as it is then, so a queue that has just reclaimed may let another go first. Each pending
task of the job whose queue may grow by it
(``Preemptive``: for proportion, the queue is open and stays within its deserved share) is
pipelined onto a node, evicting ``Running`` preemptable tasks of *other* queues that are
reclaimable (``spec.reclaimable``, default true) and that the ``Reclaimable`` tiers allow (for
proportion: tasks of queues above their deserved share, while they stay above it), until the task
fits. The job's evictions and pipelines are committed only if the job ends up pipelined, so a gang
that cannot start as a whole evicts nothing. Victim search: :mod:`caldera.actions._evict`.
Volcano 1.15's gang-aware ``gangreclaim`` is the same action here.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.actions._evict import (
    BoolArray,
    CandidateArgs,
    VictimTable,
    candidate_nodes,
    make_room_for_job,
    starving_jobs,
    turns_by_queue_share,
)
from caldera.api.queue import Queue
from caldera.api.task import Task, TaskStatus
from caldera.framework.plugin import Action
from caldera.framework.session import Session

__all__ = ["GangReclaimAction", "ReclaimAction", "ReclaimArgs"]


class ReclaimArgs(CandidateArgs):
    predicate_error_cache_enable: bool = Field(True, alias="predicateErrorCacheEnable")
    pending_jobs: bool = Field(False, alias="reclaimPendingJobs")
    """Caldera's: reclaim for jobs not admitted yet too (admitting them when it commits).
    Volcano reclaims only for admitted jobs, so a full cluster whose admission budget is held
    by others never reclaims (volcano #4679, #4817); the shipped policies turn this on."""


class ReclaimAction(Action[ReclaimArgs]):
    name: ClassVar[str] = "reclaim"
    Args = ReclaimArgs

    def execute(self, ssn: Session) -> None:
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

            def eligible(_: Task, others: BoolArray = others) -> BoolArray:
                return others

            def may_grow(task: Task, queue: Queue = queue) -> bool:
                return ssn.preemptive(queue, task)

            make_room_for_job(
                ssn,
                table,
                job,
                eligible,
                ssn.reclaimable,
                "reclaim",
                max_candidates=limit,
                may_grow=may_grow,
            )


class GangReclaimAction(ReclaimAction):
    """Volcano 1.15's ``gangreclaim``: the same gang-aware search."""

    name: ClassVar[str] = "gangreclaim"
