"""Which jobs preempt and reclaim serve, and in what order (shared by both actions).

Volcano's ``preempt`` and ``reclaim`` pick the same jobs (``Execute`` of each): valid jobs past
Pending whose queue exists and that are starving (``JobStarving``), grouped by queue, each
group in job order and each job's pending tasks in task order. A job that is not starving or
not valid is passed over; for ``caldera explain`` its pending pods are told why.
"""

from __future__ import annotations

from collections.abc import Iterator

from caldera.actions._walk import NodeWalk
from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.statement import Statement

__all__ = ["discard_for", "preemptors", "queue_turns", "tell"]


def tell(ssn: SessionView, job: Job, message: str) -> None:
    """Note ``message`` for each of ``job``'s pending pods that has no note yet."""
    for task in job.tasks_in(TaskStatus.PENDING):
        ssn.result.preemption_notes.setdefault(task.key, message)


def preemptors(ssn: SessionView, action: str, *, pending_too: bool) -> dict[str, list[Job]]:
    """Queue name → its starving jobs (in job order), as Volcano's actions collect them; with
    ``pending_too`` (Caldera's ``preemptPendingJobs`` / ``reclaimPendingJobs``) jobs not
    admitted yet count as well."""
    out: dict[str, list[Job]] = {}
    for job in ssn.active_jobs():
        if job.queue not in ssn.queues or not job.placeable():
            continue
        if job.is_pending() and not pending_too:
            tell(ssn, job, f"{action}: the job is not admitted yet (its PodGroup is Pending)")
            continue
        invalid = ssn.job_valid(job)
        if invalid is not None:
            tell(ssn, job, f"{action}: the job is not valid ({invalid.message})")
            continue
        if not ssn.job_starving(job):
            tell(
                ssn,
                job,
                f"{action}: the job is not starving (it has as many pods placed or pipelined "
                "as it needs)",
            )
            continue
        out.setdefault(job.queue, []).append(job)
    job_key = ssn.job_order_key()
    for jobs in out.values():
        jobs.sort(key=job_key)
    return out


def queue_turns(
    ssn: SessionView, by_queue: dict[str, list[Job]]
) -> Iterator[tuple[Queue, Iterator[tuple[Job, list[Task]]]]]:
    """Each queue with starving jobs, in queue order, with its jobs in job order, each with its
    pending tasks in task order (the preemptor queues of Volcano's ``preempt``)."""
    task_key = ssn.task_order_key()
    queue_key = ssn.queue_order_key()
    for queue in sorted((ssn.queues[q] for q in by_queue), key=queue_key):
        jobs = by_queue[queue.name]
        yield queue, ((job, sorted(job.placeable(), key=task_key)) for job in jobs)


def discard_for(walk: NodeWalk, stmt: Statement, job: Job, action: str) -> None:
    """Undo ``stmt`` (the job is not pipelined) and tell the job's pods why."""
    had = bool(len(stmt))
    walk.rollback(stmt)
    if had:
        for task in job.tasks_in(TaskStatus.PENDING):
            walk.ssn.result.preemption_notes[task.key] = (
                f"{action}: room was found for some pods, but the job would still not have "
                "enough placed to start, so nothing is evicted"
            )
