"""backfill: place best-effort tasks (no resource request) of admitted jobs.

Best-effort pods take no cpu or memory, so there is no gang to wait for and no quota to check:
each goes straight to the best node that passes the filters and has a free pod slot, and is bound.
A job with a hard network topology keeps them inside the HyperNode holding its other pods.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from caldera.api.fiterror import FitErrors
from caldera.framework.interfaces import SessionView
from caldera.framework.placement import choose_node
from caldera.framework.plugin import Action, Args
from caldera.framework.topology import home_of

__all__ = ["BackfillAction", "BackfillArgs"]


class BackfillArgs(Args):
    predicate_error_cache_enable: bool = Field(True, alias="predicateErrorCacheEnable")
    """Accepted for Volcano compatibility; best-effort tasks are filtered once each anyway."""


class BackfillAction(Action[BackfillArgs]):
    name: ClassVar[str] = "backfill"
    Args = BackfillArgs

    def execute(self, ssn: SessionView) -> None:
        task_key = ssn.task_order_key()
        # only jobs with a best-effort pod waiting are backfill's: the rest are not sorted
        waiting = [j for j in ssn.active_jobs() if j.pending_best_effort_num()]
        for job in sorted(waiting, key=ssn.job_order_key()):
            if job.is_pending() or ssn.job_valid(job) is not None:
                continue
            pending = [t for t in job.placeable() if t.best_effort]
            home = home_of(ssn, job) if pending else None
            if isinstance(home, str):
                for task in pending:
                    job.nodes_fit_errors[task.uid] = FitErrors(
                        total=len(ssn.nodes), message=home, plain=True
                    )
                continue
            for task in sorted(pending, key=task_key):
                choice = choose_node(ssn, task, future=False, within=home)
                if isinstance(choice, FitErrors):
                    job.nodes_fit_errors[task.uid] = choice
                    continue
                ssn.allocate(task, choice.node)
