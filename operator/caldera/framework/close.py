"""Session close: what the session's decisions mean for PodGroup, Queue and Pod status.

Runs every plugin's ``on_session_close`` (gang writes its conditions there), then computes for every
job its PodGroup phase and counters with Volcano's ``jobStatus`` rules, for every queue its
``status.allocated`` (summed up through its ancestors to ``root``), and for every pod still waiting
its ``PodScheduled`` condition. Each status carries whether it differs from what the API holds, so
the writer sends only changes.
"""

from __future__ import annotations

import time

import numpy as np

from caldera.api.hypernode import HyperNodeTree
from caldera.api.job import Job
from caldera.api.jobtable import sum_by_queue
from caldera.api.reasons import REASON_UNSCHEDULABLE, nominated_node, task_scheduling_reason
from caldera.api.resources import Vector
from caldera.api.task import ALLOCATED_STATUSES, Gate, TaskStatus
from caldera.framework.intents import (
    HyperNodeStatus,
    PodCondition,
    PodGroupStatus,
    QueueStatus,
    WorkloadGroupStatus,
)
from caldera.framework.session import Session
from caldera.models.volcano import ALLOCATED_HYPERNODE_ANNOTATION, PodGroupCondition
from caldera.models.workload import REASON_SCHEDULED
from caldera.models.workload import REASON_UNSCHEDULABLE as WORKLOAD_UNSCHEDULABLE

__all__ = ["close_session", "podgroup_phase"]

_SCHEDULED = (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED)
_WAITING = (TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED)


def podgroup_phase(job: Job, session_id: str) -> str:
    """Volcano's getPodGroupPhase."""
    unschedulable = any(
        c.type == "Unschedulable" and c.status == "True" and c.transition_id == session_id
        for c in job.conditions
    )
    if job.count(TaskStatus.RUNNING) and unschedulable:
        return "Unknown"
    scheduled = job.count(*_SCHEDULED) + job.releasing_on_nodes()
    if scheduled >= job.min_available:
        finished = job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        return "Completed" if scheduled == finished else "Running"
    return "Inqueue" if job.phase == "Inqueue" else "Pending"


def _condition_key(c: PodGroupCondition) -> tuple[str, str, str, str]:
    return (c.type, c.status, c.reason, c.message)


def _podgroup_status(job: Job, session_id: str, tree: HyperNodeTree | None) -> PodGroupStatus:
    phase = podgroup_phase(job, session_id)
    running = job.count(TaskStatus.RUNNING)
    succeeded = job.count(TaskStatus.SUCCEEDED)
    failed = job.count(TaskStatus.FAILED)
    old = job.api_status
    hypernode = _allocated_hypernode(job, tree)
    moved = bool(hypernode) and hypernode != job.annotations.get(ALLOCATED_HYPERNODE_ANNOTATION)
    counts = (phase, running, succeeded, failed)
    changed = (
        moved
        or counts != (old.phase, old.running, old.succeeded, old.failed)
        or [_condition_key(c) for c in job.conditions]
        != [_condition_key(c) for c in old.conditions]
    )
    return PodGroupStatus(
        namespace=job.namespace,
        name=job.name,
        phase=phase,
        running=running,
        succeeded=succeeded,
        failed=failed,
        conditions=tuple(job.conditions),
        changed=changed,
        hypernode=hypernode,
    )


def _workload_status(job: Job, evicted: set[str]) -> WorkloadGroupStatus | None:
    """A Kubernetes PodGroup's verdict (kube-scheduler's ``submitPodGroupAlgorithmResult``):
    scheduled once minCount of its pods are bound; None while the binds that make it so are in
    flight (a bind that fails makes it a ``SchedulerError`` instead, never a True taken back)."""
    scheduled = job.count(*_SCHEDULED) >= job.min_available
    victims = sorted(t.name for uid, t in job.tasks.items() if uid in evicted)
    if not scheduled and job.ready_task_num() >= job.min_available and not victims:
        return None
    message = ""
    if not scheduled:
        # the gang plugin's verdict (its PodGroup condition's message), else the first pod's
        pending = sorted(job.by_status.get(TaskStatus.PENDING, {}).values(), key=lambda t: t.key)
        first = task_scheduling_reason(job, pending[0])[1] if pending else ""
        message = job.fit_error or first
    return WorkloadGroupStatus(
        job.namespace,
        job.name,
        scheduled,
        REASON_SCHEDULED if scheduled else WORKLOAD_UNSCHEDULABLE,
        message,
        disrupted=(
            f"preempting {len(victims)} of its pods ({', '.join(victims)}) to accommodate "
            "higher priority pods"
            if victims
            else ""
        ),
    )


def _allocated_hypernode(job: Job, tree: HyperNodeTree | None) -> str:
    """The lowest HyperNode holding every placed task of a job with network topology ("" for
    other jobs): Volcano's ``volcano.sh/job-allocated-hypernode``. Derived from the placements,
    not remembered, so every session says the same until the job moves."""
    if tree is None or job.network_topology is None:
        return ""
    holder = tree.lowest_holding(job.node_rows(ALLOCATED_STATUSES))
    return tree.names[holder] if holder >= 0 else ""


def _queue_allocated(ssn: Session) -> dict[str, Vector]:
    """Per queue, what its jobs and its descendants' jobs hold at the session's end."""
    names = list(ssn.queues)
    jobs = ssn.active_jobs()
    woken = ssn.settled.woken
    # the settled jobs as counted at open; those the session woke, as they are now instead
    counted = [*jobs, *woken]
    rows = [job.allocated for job in jobs] + [-job.allocated_at_open() for job in woken]
    held = np.array(rows, dtype=np.float64).reshape(len(counted), len(ssn.space))
    own = sum_by_queue([job.queue for job in counted], names, held)
    own += ssn.settled.by_queue(names)[0]
    allocated = {name: ssn.space.zeros() for name in names}
    for i, start in enumerate(names):
        name: str | None = start
        seen: set[str] = set()
        while name is not None and name in allocated and name not in seen:
            seen.add(name)
            allocated[name] += own[i]
            queue = ssn.queues[name]
            name = None if name == "root" else (queue.parent or "root")
    return allocated


def close_session(ssn: Session) -> None:
    start = time.perf_counter()
    for plugin in ssn.plugins:
        plugin.on_session_close(ssn)
    result = ssn.result
    tree = ssn.hypernodes
    if tree is not None:
        result.hypernodes = [HyperNodeStatus(n, c) for n, c in sorted(tree.stale_counts.items())]
    if ssn.snapshot.shard is not None:
        result.shard_status = ssn.snapshot.shard.status
    evicted = {e.uid for e in result.evictions}
    for job in sorted(ssn.active_jobs(), key=lambda j: j.uid):
        if job.topology_trace is not None:
            result.topology[job.uid] = job.topology_trace
        if job.has_object:
            result.podgroups.append(_podgroup_status(job, ssn.uid, tree))
        elif job.workload and job.tasks:
            verdict = _workload_status(job, evicted)
            if verdict is not None:
                result.workload_groups.append(verdict)
        for status in _WAITING:
            waiting = job.by_status.get(status)
            if not waiting:
                continue
            for task in sorted(waiting.values(), key=lambda t: t.key):
                if task.gate is Gate.OTHER or (task.gate is Gate.QUEUE and task.reserved):
                    continue  # another's gate (the API server's condition stands), or lifted now
                reason, message = task_scheduling_reason(job, task)
                fit = job.nodes_fit_errors.get(task.uid) if task.key == ssn.traced else None
                if fit is not None and fit.nodes and message == fit.available():
                    result.traced_nodes = dict(fit.nodes)  # the nodes its message counts
                nominated = nominated_node(task)
                result.pod_conditions.append(
                    PodCondition(
                        task.namespace, task.name, task.uid, reason, message, nominated=nominated
                    )
                )
    for task, why in (ssn.snapshot.held[k] for k in sorted(ssn.snapshot.held)):
        result.pod_conditions.append(
            PodCondition(task.namespace, task.name, task.uid, REASON_UNSCHEDULABLE, why, held=True)
        )
    for name, vec in sorted(_queue_allocated(ssn).items()):
        quantities = ssn.space.to_quantities(vec)
        old = ssn.space.to_quantities(ssn.space.vector(ssn.queues[name].status_allocated))
        result.queues.append(QueueStatus(name, quantities, changed=quantities != old))
    result.timings["close"] = time.perf_counter() - start
