"""Lifting queue-allocation gates: a gated pod is let go once its queue has room for it.

A pod that opts in (annotation ``scheduling.volcano.sh/queue-allocation-gate: "true"``) is created
with the scheduling gate of that name, so no scheduler places it and autoscalers, which only
react to ``Unschedulable`` pods, do not add nodes for work its queue could not run anyway. At the
start of ``allocate``, each admitted job's gated pods are asked of the queue in the order the
allocate action would place them (``Allocatable``: ``capacity`` against the queue's capability,
``proportion`` against its deserved share); a pod its queue takes is reserved in the queue at once
and its gate is lifted (one patch). Until it is placed, a lifted pod keeps its reservation in every
later session (:meth:`Session._reserve_lifted`), so later pods see the room it will take and a
burst never admits more than the queue holds.

Beyond Volcano (``allocateResourcesForTasks`` with ``SchGateManager``, capacity only): a gang's
gates are lifted together or not at all (lifting fewer than it needs to start would hold the
queue's room for pods that cannot run), and ``proportion`` reserves as ``capacity`` does.
"""

from __future__ import annotations

from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.task import Gate, Task, TaskStatus
from caldera.framework.intents import GateLift
from caldera.framework.interfaces import SessionView

__all__ = ["lift_gates"]


def lift_gates(ssn: SessionView, *, admitted_only: bool) -> int:
    """Lift the gates whose queues have room; returns how many. With ``admitted_only`` (an
    ``enqueue`` action runs), jobs whose PodGroup is still Pending wait for it."""
    gated: dict[str, list[Task]] = {}
    for job in ssn.active_jobs():
        pending = job.by_status.get(TaskStatus.PENDING)
        if not pending:
            continue
        waiting = [t for t in pending.values() if t.gate is Gate.QUEUE]
        if waiting:
            gated[job.uid] = waiting
    if not gated:
        return 0
    lifted = 0
    job_key, task_key, queue_key = ssn.job_order_key(), ssn.task_order_key(), ssn.queue_order_key()
    by_queue: dict[str, list[Job]] = {}
    for job in sorted((ssn.jobs[uid] for uid in gated), key=job_key):
        if job.queue in ssn.queues:
            by_queue.setdefault(job.queue, []).append(job)
    waits = ssn.result.gate_waits
    for queue in sorted((ssn.queues[name] for name in by_queue), key=queue_key):
        for job in by_queue[queue.name]:
            tasks = sorted(gated[job.uid], key=task_key)
            why = _not_now(ssn, job, admitted_only)
            if why:
                waits.update((t.key, why) for t in tasks)
                continue
            taken = [t for t in tasks if _take(ssn, queue, t)]
            for task in tasks:
                if not task.reserved:
                    waits[task.key] = ssn.refusals.get(task.uid, f"queue {queue.name} has no room")
            startable = job.ready_task_num() + job.waiting_task_num() + len(job.placeable())
            if startable + len(taken) < job.min_available:
                for task in taken:  # not enough of the gang: hold no room for part of it
                    ssn.reserve(task, -1.0)
                    waits[task.key] = (
                        f"its gang needs {job.min_available} pods to start and queue "
                        f"{queue.name} has room for {startable + len(taken)} of them now"
                    )
                continue
            ssn.result.gate_lifts.extend(
                GateLift(t.namespace, t.name, t.uid, queue.name) for t in taken
            )
            lifted += len(taken)
    return lifted


def _not_now(ssn: SessionView, job: Job, admitted_only: bool) -> str:
    """Why none of ``job``'s gates is asked of its queue this session ("" when they are)."""
    if admitted_only and job.is_pending():
        return "its PodGroup is not admitted yet (phase Pending): enqueue admits it first"
    invalid = ssn.job_valid(job)
    return f"its job is not valid: {invalid.message}" if invalid is not None else ""


def _take(ssn: SessionView, queue: Queue, task: Task) -> bool:
    """The queue takes ``task``: reserve its room now, for the pods asked after it."""
    if not ssn.allocatable(queue, task):
        return False
    ssn.reserve(task, 1.0)
    return True
