"""preempt: starving jobs take room from lower-priority work of their own queue.

As Volcano 1.15's ``preempt`` (``Action.Execute`` in ``actions/preempt/preempt.go``):

- **Who preempts.** Every valid job past Pending whose queue exists and that is starving
  (``JobStarving``; gang: pipelined + ready below minMember, priority: below its task count).
  Queues take turns in queue order.
- **Between jobs of a queue.** Jobs in job order; each job's pending tasks in task order, one
  at a time *while the job is still starving*: each is pipelined on the first node (best score
  first) where evicting ``Running``/``Bound``, preemptable tasks of *other* jobs of its queue,
  chosen by the ``Preemptable`` tiers, makes it fit (:mod:`caldera.actions._walk`); a
  ``preemptionPolicy: Never`` task and a BestEffort preemptor's claim on a pod that requests
  resources are refused as Volcano refuses them. The job's statement is committed only if the
  job is then pipelined (``JobPipelined``); otherwise every eviction is undone.
- **Within a job.** Then each of those jobs' pending tasks may evict its own job's tasks (the
  tiers decide: priority lets a task evict lower-priority tasks of its job), one statement per
  task, stopping at the job's first task that gets nothing.

A task fits a node only if its queue is ``Allocatable``, its request is within the node's future
idle resources and its filters pass, checked again after each eviction, so a queue at its
capability evicts its own lower-priority pods until it is back within bounds.

Caldera's switch ``preemptPendingJobs`` (on in the shipped policies) also serves jobs not
admitted yet, admitting them when their statement commits. The gang-aware choice of the
cheapest victims across nodes is ``gangpreempt`` (:mod:`caldera.actions.gang`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.actions._evict import BoolArray, CandidateArgs, commit_with_victims
from caldera.actions._jobs import discard_for, preemptors, queue_turns
from caldera.actions._walk import NodeWalk
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Action

__all__ = ["PreemptAction", "PreemptArgs"]


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

    def execute(self, ssn: SessionView) -> None:
        by_queue = preemptors(ssn, self.name, pending_too=self.args.pending_jobs)
        if not by_queue:
            return
        walk = NodeWalk(
            ssn,
            self.args,
            self.name,
            ssn.preemptable_point,
            allocatable=True,
            needs_candidates=False,
            topology_aware=self.args.enable_topology_aware_preemption,
            nominated=True,
        )
        table = walk.table
        statuses = (TaskStatus.RUNNING, TaskStatus.BOUND)
        held = np.array([t.status in statuses for t in table.tasks], dtype=bool)
        task_key = ssn.task_order_key()
        for queue, jobs in queue_turns(ssn, by_queue):
            in_queue = held & (table.queue == table.queue_ids.get(queue.name, -2))
            for job, tasks in jobs:
                stmt = ssn.statement()
                others = in_queue & (table.job != table.job_id(job.uid))
                rows_of = _rule(others, table.best_effort)
                while ssn.job_starving(job) and tasks:
                    task = tasks.pop(0)
                    if walk.eligible(task):
                        walk.make_room(stmt, task, job, queue, rows_of)
                if ssn.job_pipelined(job):
                    commit_with_victims(ssn, stmt, job, stmt.evicted())
                else:
                    discard_for(walk, stmt, job, self.name)
            # preemption between the tasks of one job (``preemptorTasks`` rebuilt per job)
            walk.second_pass = True
            for job in by_queue[queue.name]:
                own = held & (table.job == table.job_id(job.uid))
                rows_of = _rule(own, table.best_effort)
                for task in sorted(job.placeable(), key=task_key):
                    stmt = ssn.statement()
                    if walk.eligible(task) and walk.make_room(stmt, task, job, queue, rows_of):
                        commit_with_victims(ssn, stmt, job, stmt.evicted())
                        continue
                    walk.rollback(stmt)
                    break
            walk.second_pass = False


def _rule(rows: BoolArray, best_effort: BoolArray) -> Callable[[Task], BoolArray]:
    """Preempt's filter over the victim table (``rows``: ``Running``/``Bound`` tasks of the
    jobs it may take from): a BestEffort preemptor only takes BestEffort pods."""
    be: BoolArray = rows & best_effort

    def rows_of(task: Task) -> BoolArray:
        return be if task.best_effort else rows

    return rows_of
