"""drf: dominant resource fairness between jobs.

A job's share is its largest fraction of any cluster resource; jobs with smaller shares go first,
and a task may preempt another job's task only if that leaves the victim's job with at least the
preemptor's share. Shares are kept current through the session's allocate/deallocate events,
which (as in Volcano) also fire for pipelined tasks, so a task waiting for released resources
already counts toward its job's share.

With ``enableHierarchy`` (hierarchical drf, Volcano's hdrf) queues are also ordered by the queue
tree's shares (:mod:`caldera.plugins.hierarchy`), and a reclaimer may take a task from another
queue only while that queue, even without the task, still comes after the reclaimer's queue with
the reclaimer's task added (so shares move toward the weights, not past them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from caldera.api.compare import ShareMeter
from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.interfaces import EventHandler, SessionView
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.points import PERMIT
from caldera.plugins.hierarchy import QueueTree

__all__ = ["DrfPlugin"]

SHARE_DELTA = 0.000001


class _Shares(dict[str, float]):
    """Jobs' dominant shares: the active jobs' worked out at open, a settled job's when first
    asked (only victim searches ask)."""

    of_settled: Callable[[str], float]

    def __missing__(self, uid: str) -> float:
        value = self[uid] = self.of_settled(uid)
        return value


class DrfPlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "drf"
    supports_hierarchy: ClassVar[bool] = True

    def on_session_open(self, ssn: SessionView) -> None:
        share = ShareMeter(ssn.space, ssn.snapshot.total_allocatable())
        table = ssn.job_table
        at_open = table.allocated
        shares = _Shares(zip(table.row, share.many(at_open).tolist(), strict=True))
        shares.of_settled = lambda uid: share(ssn.jobs[uid].allocated_at_open())
        self.shares = shares
        allocated: dict[str, Vector] = {}
        """Jobs' allocations as the session changed them (the rest are as at open)."""

        def allocation(job: str) -> Vector:
            alloc = allocated.get(job)
            if alloc is None:
                row = table.row.get(job)
                alloc = allocated[job] = (
                    at_open[row].copy()
                    if row is not None
                    else ssn.jobs[job].allocated_at_open().copy()  # a settled job
                )
            return alloc

        def update(task: Task, sign: float) -> None:
            if task.job in ssn.jobs:
                alloc = allocation(task.job)
                alloc += sign * task.resreq
                shares[task.job] = share(alloc)

        def preemptable(preemptor: Task, preemptees: Sequence[Task]) -> tuple[list[Task], int]:
            mine = share(allocation(preemptor.job) + preemptor.resreq)
            remaining: dict[str, Vector] = {}
            victims = []
            for task in preemptees:
                alloc = remaining.get(task.job)
                if alloc is None:
                    alloc = allocation(task.job).copy()
                alloc -= task.resreq
                remaining[task.job] = alloc
                theirs = share(alloc)
                if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
                    victims.append(task)
            return victims, PERMIT

        ssn.job_order_point.add_key(self.name, lambda j: shares[j.uid])
        ssn.preemptable_point.add(self.name, preemptable)
        ssn.event_handlers.add(self.name, EventHandler.counting(update))
        if self.option.hierarchy:
            self._hierarchy(ssn)

    def _hierarchy(self, ssn: SessionView) -> None:
        """Hierarchical drf: queue order and reclaim by the queue tree's shares."""
        queues = ssn.queues
        tree = QueueTree.build(
            ssn.space,
            ssn.snapshot.total_allocatable(),
            queues,
            {n: q.annotations for n, q in queues.items()},
        )
        # per queue, what its jobs hold and hold plus ask (the settled jobs' sums included)
        table = ssn.job_table
        names = sorted(table.queue_names())
        allocated, request, _, _ = table.queue_sums(names)
        for i, name in enumerate(names):
            tree.add(name, allocated[i], request[i])

        def reclaimable(reclaimer: Task, reclaimees: Sequence[Task]) -> tuple[list[Task], int]:
            mine = ssn.jobs[reclaimer.job].queue
            taken: dict[str, Vector] = {mine: reclaimer.resreq.copy()}
            victims = []
            for task in reclaimees:
                theirs = ssn.jobs[task.job].queue
                if theirs == mine:
                    continue
                trial = {**taken, theirs: taken.get(theirs, 0.0) - task.resreq}
                # the victim's queue, even without it, still comes no earlier than the
                # reclaimer's with the task: shares move toward the weights, never past them
                if tree.compare(mine, theirs, trial) <= 0:
                    taken = trial
                    victims.append(task)
            return victims, PERMIT

        def update(task: Task, sign: float) -> None:
            job = ssn.jobs.get(task.job)
            if job is not None:
                tree.add(job.queue, sign * task.resreq, ssn.space.zeros())

        ssn.queue_order_point.add_cmp(
            self.name, lambda left, right: tree.compare(left.name, right.name)
        )
        ssn.reclaimable_point.add(self.name, reclaimable)
        ssn.event_handlers.add(self.name, EventHandler.counting(update))
