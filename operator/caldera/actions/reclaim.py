"""reclaim: queues that may grow take back what other queues hold beyond their share.

As Volcano 1.15's ``reclaim`` (``Action.Execute`` and ``reclaimForTask`` in
``actions/reclaim/reclaim.go``):

- **Who reclaims.** Starving jobs, as for preempt (:mod:`caldera.actions._jobs`). Queues take
  turns in queue order; a queue that is ``Overused`` when its turn comes is passed over. A turn
  serves the queue's next job in job order, and the queue goes back in line (keyed by its share
  as that job left it) while it has jobs left.
- **A job's tasks.** In task order, while the job is starving. A task with ``preemptionPolicy:
  Never``, one its queue may not grow by (``Preemptive``; for proportion: within its deserved
  share, for capacity: see the plugin), or one whose pre-filter fails is passed over and the
  next task is tried.
- **Where.** Only a node holding ``Running``, preemptable tasks of *another* queue that is
  reclaimable (``spec.reclaimable``, default true) is a reclaim candidate; reclaim never
  pipelines onto the idle room of a node with nothing to reclaim (allocate places such pods).
  Nodes are walked best score first; on each the ``Reclaimable`` tiers choose victims among the
  candidates, evicted in victim order while the task does not fit the node's future idle
  resources (its idle room counts) and filters (:mod:`caldera.actions._walk`).
- The job's statement is committed if the job is then pipelined, else undone.

Caldera's switch ``reclaimPendingJobs`` (on in the shipped policies) also serves jobs not
admitted yet, admitting them when their statement commits (volcano #4679, #4817). The
gang-aware search is ``gangreclaim`` (:mod:`caldera.actions.gang`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.actions._evict import BoolArray, CandidateArgs, commit_with_victims
from caldera.actions._jobs import discard_for, preemptors, tell
from caldera.actions._queues import OrderedQueue
from caldera.actions._walk import NodeWalk
from caldera.api.job import Job
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Action

__all__ = ["ReclaimAction", "ReclaimArgs"]


class ReclaimArgs(CandidateArgs):
    predicate_error_cache_enable: bool = Field(True, alias="predicateErrorCacheEnable")
    pending_jobs: bool = Field(False, alias="reclaimPendingJobs")
    """Caldera's: reclaim for jobs not admitted yet too (admitting them when it commits).
    Volcano reclaims only for admitted jobs, so a full cluster whose admission budget is held
    by others never reclaims (volcano #4679, #4817); the shipped policies turn this on."""


class ReclaimAction(Action[ReclaimArgs]):
    name: ClassVar[str] = "reclaim"
    Args = ReclaimArgs

    def execute(self, ssn: SessionView) -> None:
        by_queue = preemptors(ssn, self.name, pending_too=self.args.pending_jobs)
        if not by_queue:
            return
        walk = NodeWalk(
            ssn,
            self.args,
            self.name,
            ssn.reclaimable_point,
            allocatable=False,
            needs_candidates=True,
        )
        table = walk.table
        open_queue = np.array(
            [ssn.queues[q].reclaimable if q in ssn.queues else False for q in table.queue_ids],
            dtype=bool,
        )
        running = np.array([t.status is TaskStatus.RUNNING for t in table.tasks], dtype=bool)
        reclaimable = np.append(open_queue, False)[table.queue] & running
        task_key = ssn.task_order_key()
        lines = {q: list(jobs) for q, jobs in by_queue.items()}
        # per queue: the victim-table rows of the other, reclaimable queues' running pods
        others = {q: reclaimable & (table.queue != table.queue_ids.get(q, -2)) for q in lines}
        queues = OrderedQueue(ssn.queue_order_key(), (ssn.queues[q] for q in sorted(lines)))
        while queues:
            queue = queues.pop()
            line = lines[queue.name]
            if ssn.overused(queue):
                for job in line:
                    tell(ssn, job, f"reclaim: queue {queue.name} is overused (at its share)")
                continue
            job = line.pop(0)

            def rows_of(_: Task, rows: BoolArray = others[queue.name]) -> BoolArray:
                return rows

            stmt = ssn.statement()
            tasks = sorted(job.placeable(), key=task_key)
            while ssn.job_starving(job) and tasks:
                task = tasks.pop(0)
                if self._may_reclaim(ssn, walk, job, task):
                    walk.make_room(stmt, task, job, queue, rows_of)
            if ssn.job_pipelined(job):
                commit_with_victims(ssn, stmt, job, stmt.evicted())
            else:
                discard_for(walk, stmt, job, self.name)
            if line:
                queues.push(queue)

    @staticmethod
    def _may_reclaim(ssn: SessionView, walk: NodeWalk, job: Job, task: Task) -> bool:
        """The per-task gates of Volcano's reclaim loop (its pre-filter is the walk's first
        step)."""
        if not walk.eligible(task):
            return False
        queue = ssn.queues[job.queue]
        if not ssn.preemptive(queue, task):
            why = ssn.refusals.get(task.uid, "")
            walk.note(
                task,
                f"queue {queue.name} may not grow by this pod (not Preemptive)"
                + (f": {why}" if why else ""),
            )
            return False
        return True
