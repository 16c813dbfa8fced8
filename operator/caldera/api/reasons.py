"""The texts Volcano shows users for a job or pod that is not running yet.

These strings are part of the compatibility contract (tools and people grep them), so they follow
Volcano's ``JobInfo.FitError`` and ``TaskSchedulingReason``, with two deliberate differences:
where Volcano picks "the first" task from a Go map (random), we pick the first task in task order;
and a pod that fits no node says so in kube-scheduler's words (``0/N nodes are available: …``),
which is what users of ``kubectl describe pod`` and the cluster autoscaler read, while the
PodGroup's condition keeps Volcano's text.
"""

from __future__ import annotations

from caldera.api.fiterror import histogram
from caldera.api.job import Job
from caldera.api.task import Gate, Task, TaskStatus
from caldera.models.volcano import QUEUE_ALLOCATION_GATE

__all__ = [
    "GATED_MESSAGE",
    "POD_GROUP_NOT_READY",
    "POD_GROUP_READY",
    "REASON_GATED",
    "REASON_SCHEDULABLE",
    "REASON_UNSCHEDULABLE",
    "job_fit_error",
    "nominated_node",
    "task_scheduling_reason",
]

POD_GROUP_READY = "pod group is ready"
POD_GROUP_NOT_READY = "pod group is not ready"
REASON_SCHEDULABLE = "Schedulable"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_GATED = "SchedulingGated"
"""kube-scheduler's reason for a pod a scheduling gate holds: autoscalers leave it alone."""
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
"""The API server's message for it."""
ALL_NODES_UNAVAILABLE = "all nodes are unavailable"


def _ordered(job: Job) -> list[Task]:
    return sorted(job.tasks.values(), key=lambda t: (t.creation, t.name))


def task_scheduling_reason(job: Job, task: Task) -> tuple[str, str]:
    """(reason, message) for a task's ``PodScheduled=False`` condition."""
    if task.gate is Gate.QUEUE:
        gate = f"scheduling gate {QUEUE_ALLOCATION_GATE}"
        return REASON_GATED, f"waiting for queue {job.queue} to have room for it ({gate})"
    if task.gate is Gate.OTHER:
        return REASON_GATED, GATED_MESSAGE
    status = task.status
    node = task.node_name
    if status is TaskStatus.PENDING and task.last_transaction is not None:
        status, node = task.last_transaction.status, task.last_transaction.node
    where = f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}"
    if status is TaskStatus.ALLOCATED:
        return REASON_SCHEDULABLE, f"{where}, once minAvailable is satisfied"
    if status is TaskStatus.PIPELINED:
        return (
            REASON_UNSCHEDULABLE,
            f"{where}, once resource is released and minAvailable is satisfied",
        )
    if status is TaskStatus.PENDING:
        fit = job.nodes_fit_errors.get(task.uid)
        if fit is not None:
            return REASON_UNSCHEDULABLE, fit.available()
        return REASON_UNSCHEDULABLE, job.fit_error or ALL_NODES_UNAVAILABLE
    return str(status), job.fit_error


def nominated_node(task: Task) -> str:
    """``TaskSchedulingReason``'s ``nominatedNodeName``: the node a task is pipelined on once
    pods were evicted there for it ("" otherwise; the pod's old nomination then stands)."""
    status, node, evicted = task.status, task.node_name, task.eviction_occurred
    if status is TaskStatus.PENDING and task.last_transaction is not None:
        tx = task.last_transaction
        status, node, evicted = tx.status, tx.node, tx.eviction_occurred
    return node if status is TaskStatus.PIPELINED and evicted else ""


def job_fit_error(job: Job) -> str:
    """Volcano's ``FitError()``: readiness, a histogram of task states, the reasons of pending
    tasks, and the origin reason (the job-level reason, or the first task that fit nowhere)."""
    states: dict[str, int] = {}
    for status, tasks in job.by_status.items():
        if tasks:
            states[str(status)] = states.get(str(status), 0) + len(tasks)
    states["minAvailable"] = job.min_available
    head = POD_GROUP_READY if job.is_ready() else POD_GROUP_NOT_READY
    msg = f"{head}, {histogram(states)}"
    pending: dict[str, int] = {}
    for task in job.by_status.get(TaskStatus.PENDING, {}).values():
        reason, _ = task_scheduling_reason(job, task)
        pending[reason] = pending.get(reason, 0) + 1
    if pending:
        msg += f"; {TaskStatus.PENDING}: {histogram(pending)}"
    if job.fit_error:
        msg += f". Origin reason is {job.fit_error}"
    else:
        for task in _ordered(job):
            fit = job.nodes_fit_errors.get(task.uid)
            if fit is not None:
                msg += f". Origin reason is {task.name}: {fit.error()}"
                break
    return msg
