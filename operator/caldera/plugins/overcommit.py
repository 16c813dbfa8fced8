"""overcommit: admit jobs while the cluster, inflated by a factor, still has room for them.

Idle is ``total × overcommit-factor − used``; jobs already admitted (Inqueue, or Running but short
of their minResources) hold their not-yet-placed minimum against it.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from caldera.api.compare import le_where, overrun, short_names
from caldera.api.job import Job
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.points import PERMIT, REJECT

__all__ = ["OvercommitArgs", "OvercommitPlugin"]

DEFAULT_FACTOR = 1.2


class OvercommitArgs(Args):
    factor: float = Field(DEFAULT_FACTOR, alias="overcommit-factor")


class OvercommitPlugin(Plugin[OvercommitArgs]):
    name: ClassVar[str] = "overcommit"
    Args = OvercommitArgs

    def on_session_open(self, ssn: SessionView) -> None:
        space = ssn.space
        factor = self.args.factor if self.args.factor >= 1.0 else DEFAULT_FACTOR
        budget = ssn.snapshot.total_allocatable() * factor
        used = ssn.nodes.used.sum(axis=0)
        idle = budget - used
        table = ssn.job_table
        inqueue = table.total_admitted()

        def enqueueable(job: Job) -> int:
            if job.min_resources is None:
                return PERMIT
            need = inqueue + job.min_resources
            if le_where(space, need, idle, job.min_resources):
                return PERMIT
            short = short_names(space, need, idle, need)
            over = ", ".join(f"overused {n}" for n in short)
            msg = "resource in cluster is overused" + (f": {over}" if over else "")
            ssn.record_event(job, "Normal", "Unschedulable", msg)  # Volcano's exact event text
            if short:  # the reason then gives the numbers that make it true
                terms = [(used, "used"), (inqueue, "admitted"), (job.min_resources, "requested")]
                what = "allocatable × overcommit-factor"
                msg += f" ({overrun(space, terms, budget, what, short)})"
            job.fit_error = msg
            return REJECT

        def enqueued(job: Job) -> None:
            nonlocal inqueue
            if job.min_resources is not None:
                inqueue = inqueue + job.min_resources

        ssn.job_enqueueable_point.add(self.name, enqueueable)
        ssn.job_enqueued_point.add(self.name, enqueued)
