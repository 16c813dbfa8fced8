"""enqueue: admit Pending jobs (PodGroup phase Pending → Inqueue) when the plugins allow it.

Queues are visited in queue order, one job per visit in job order, so admission is shared between
queues. A job without ``minResources`` is always admitted; otherwise every ``JobEnqueueable`` vote
must allow it. Admitted jobs are announced to ``JobEnqueued`` (quota plugins count them).
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

from caldera.actions._queues import OrderedQueue
from caldera.api.job import Job
from caldera.api.task import TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.placement import never_fits
from caldera.framework.plugin import Action, NoArgs

__all__ = ["EnqueueAction"]


class EnqueueAction(Action[NoArgs]):
    name: ClassVar[str] = "enqueue"

    def execute(self, ssn: SessionView) -> None:
        job_key = ssn.job_order_key()
        pending: dict[str, list[Job]] = {}
        for job in ssn.active_jobs():
            if job.queue in ssn.queues:
                bucket = pending.setdefault(job.queue, [])
                if job.is_pending():
                    bucket.append(job)
        waiting = {name: deque(sorted(jobs, key=job_key)) for name, jobs in pending.items()}
        queues = OrderedQueue(ssn.queue_order_key(), (ssn.queues[n] for n in sorted(pending)))
        while queues:
            queue = queues.pop()
            jobs = waiting[queue.name]
            if not jobs:
                continue
            job = jobs.popleft()
            if job.min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.phase = "Inqueue"
            else:
                say_if_never_fits(ssn, job)
            queues.push(queue)


def say_if_never_fits(ssn: SessionView, job: Job) -> None:
    """A job held back by a quota whose pods could not run on any node anyway is told the latter:
    "no node could ever hold this pod" outranks "the queue or cluster is at its limit"."""
    first = ""
    for task in sorted(job.tasks_in(TaskStatus.PENDING), key=ssn.task_order_key()):
        fit = never_fits(ssn, task)
        if fit is not None:
            job.nodes_fit_errors[task.uid] = fit
            first = first or f"{task.name}: {fit.error()}"
    if first:
        job.fit_error = first
