"""drf: dominant resource fairness between jobs.

A job's share is its largest fraction of any cluster resource; jobs with smaller shares go first,
and a task may preempt another job's task only if that leaves the victim's job with at least the
preemptor's share. Shares are kept current through the session's allocate/deallocate events,
which (as in Volcano) also fire for pipelined tasks, so a task waiting for released resources
already counts toward its job's share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from caldera.api.compare import ShareMeter
from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.points import PERMIT
from caldera.framework.session import EventHandler, Session

__all__ = ["DrfPlugin"]

SHARE_DELTA = 0.000001


class DrfPlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "drf"

    def on_session_open(self, ssn: Session) -> None:
        share = ShareMeter(ssn.space, ssn.snapshot.total_allocatable())
        allocated = {uid: job.allocated.copy() for uid, job in ssn.jobs.items()}
        shares = {uid: share(alloc) for uid, alloc in allocated.items()}
        self.allocated = allocated
        self.shares = shares

        def update(task: Task, sign: float) -> None:
            alloc = allocated.get(task.job)
            if alloc is not None:
                alloc += sign * task.resreq
                shares[task.job] = share(alloc)

        def preemptable(preemptor: Task, preemptees: Sequence[Task]) -> tuple[list[Task], int]:
            mine = share(allocated[preemptor.job] + preemptor.resreq)
            remaining: dict[str, Vector] = {}
            victims = []
            for task in preemptees:
                alloc = remaining.get(task.job)
                if alloc is None:
                    alloc = allocated[task.job].copy()
                alloc -= task.resreq
                remaining[task.job] = alloc
                theirs = share(alloc)
                if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
                    victims.append(task)
            return victims, PERMIT

        ssn.job_order_point.add_key(self.name, lambda j: shares[j.uid])
        ssn.preemptable_point.add(self.name, preemptable)
        ssn.event_handlers.add(
            self.name,
            EventHandler(allocate=lambda t: update(t, 1.0), deallocate=lambda t: update(t, -1.0)),
        )
