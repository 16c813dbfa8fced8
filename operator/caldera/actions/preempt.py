"""preempt: starving jobs take room from lower-priority work of their own queue.

As Volcano's preempt, for every valid job that is past Pending and starving (``JobStarving``), in
queue then job order:

1. **Between jobs of the same queue.** Each pending task (task order; ``preemptionPolicy: Never``
   is respected) is pipelined onto a node, evicting ``Running``/``Bound`` preemptable tasks of
   *other* jobs of its queue that the ``Preemptable`` tiers allow (a BestEffort preemptor never
   evicts a task that requests resources), until the job is pipelined.
2. **Within a job.** Its pending tasks may then evict its own lower-priority running tasks.

Evictions and pipelines are staged in one statement per job and committed only if the job ends
up pipelined (gang: minAvailable placed, counting what is already running); otherwise all is
undone and nothing is evicted. How victims are found and which are cheapest:
:mod:`caldera.actions._evict`. Volcano 1.15's gang-aware ``gangpreempt`` is the same action here.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from caldera.actions._evict import (
    BoolArray,
    CandidateArgs,
    VictimTable,
    candidate_nodes,
    commit_with_victims,
    evict_for,
    make_room_for_job,
    starving_jobs,
)
from caldera.api.task import Task, TaskStatus
from caldera.framework.plugin import Action
from caldera.framework.session import Session

__all__ = ["GangPreemptAction", "PreemptAction", "PreemptArgs"]


class PreemptArgs(CandidateArgs):
    enable_topology_aware_preemption: bool = Field(False, alias="enableTopologyAwarePreemption")
    topology_aware_preempt_worker_num: int = Field(16, ge=1, alias="topologyAwarePreemptWorkerNum")
    predicate_error_cache_enable: bool = Field(True, alias="predicateErrorCacheEnable")
    pending_jobs: bool = Field(False, alias="preemptPendingJobs")
    """Caldera's: preempt for jobs not admitted yet too (admitting them when it commits), so a
    high-priority job in a full cluster is not kept out by the admission budget that the pods it
    would preempt hold; the shipped policies turn this on."""


class PreemptAction(Action[PreemptArgs]):
    name: ClassVar[str] = "preempt"
    Args = PreemptArgs

    def execute(self, ssn: Session) -> None:
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
                ssn, table, job, eligible, ssn.preemptable, "preempt", max_candidates=limit
            )
        self._within_jobs(ssn, table, limit)

    def _within_jobs(self, ssn: Session, table: VictimTable, limit: int) -> None:
        """Phase 2: a job's pending tasks evict its own running tasks of lower priority."""
        task_key = ssn.task_order_key()
        for job in starving_jobs(ssn, pending_too=self.args.pending_jobs):
            for task in sorted(job.tasks_in(TaskStatus.PENDING), key=task_key):
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
                    "preempt",
                    max_candidates=limit,
                )
                if got:
                    commit_with_victims(ssn, stmt, job, got)
                else:
                    stmt.discard()


class GangPreemptAction(PreemptAction):
    """Volcano 1.15's ``gangpreempt``: the same gang-aware search."""

    name: ClassVar[str] = "gangpreempt"
