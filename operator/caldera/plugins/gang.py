"""gang: all-or-nothing placement of a PodGroup's minMember tasks, and its status conditions.

A job is valid only with enough live tasks (and enough per role, ``minTaskMember``); it is ready
when minMember tasks are placed, pipelined when they are placed or waiting for released resources.
Unready jobs go first in job order. Victims may only come from tasks above a job's minimum. At
session close every job gets Volcano's ``Unschedulable`` or ``Scheduled`` condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from caldera.api.job import READY_STATUSES, VALID_STATUSES, Job, ValidateResult
from caldera.api.reasons import job_fit_error
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.points import PERMIT, REJECT
from caldera.models.volcano import PodGroupCondition

__all__ = ["GangPlugin"]

NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
READY_REASON = "tasks in gang are ready to be scheduled"
_PIPELINED = frozenset(READY_STATUSES | {TaskStatus.PIPELINED})


def _valid(job: Job) -> ValidateResult | None:
    if not job.roles_meet_minimum(VALID_STATUSES):
        return ValidateResult(
            NOT_ENOUGH_PODS_OF_TASK, "Not enough valid pods of each task for gang-scheduling"
        )
    valid = job.valid_task_num()
    if valid < job.min_available:
        message = (
            f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {job.min_available}"
        )
        if len(job.tasks) < job.min_available:  # the usual cause: pods not created (yet)
            missing = job.min_available - len(job.tasks)
            message += (
                f" (minMember is {job.min_available} but the PodGroup has {len(job.tasks)} "
                f"pod(s): waiting for {missing} more to be created)"
            )
        return ValidateResult(NOT_ENOUGH_TASKS, message)
    return None


def _ready(job: Job) -> bool:
    return (
        job.is_ready()
        and job.roles_meet_minimum(READY_STATUSES, pending_best_effort=True)
        and job.subgroups_meet_minimum(READY_STATUSES)
    )


def _pipelined(job: Job) -> int:
    pipelined = (
        job.is_pipelined()
        and job.roles_meet_minimum(_PIPELINED, pending_best_effort=True)
        and job.subgroups_meet_minimum(_PIPELINED)
    )
    return PERMIT if pipelined else REJECT


class GangPlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "gang"

    def on_session_open(self, ssn: SessionView) -> None:
        def victims(_: Task, candidates: Sequence[Task]) -> tuple[list[Task], int]:
            occupied: dict[str, int] = {}
            chosen = []
            for task in candidates:
                job = ssn.jobs[task.job]
                left = occupied.setdefault(job.uid, job.ready_task_num())
                if left > job.min_available:
                    occupied[job.uid] = left - 1
                    chosen.append(task)
            return chosen, PERMIT

        ssn.job_valid_point.add(self.name, _valid)
        ssn.preemptable_point.add(self.name, victims)
        ssn.reclaimable_point.add(self.name, victims)
        ssn.job_order_point.add_key(self.name, lambda j: 1 if j.is_ready() else 0)
        ssn.job_ready_point.add(self.name, _ready)
        ssn.job_pipelined_point.add(self.name, _pipelined)
        ssn.job_starving_point.add(self.name, Job.is_starving)

    def on_session_close(self, ssn: SessionView) -> None:
        for job in ssn.active_jobs():
            verdict = _verdict(job) if job.tasks else None
            if verdict is None or not job.has_object:
                continue  # an in-memory group has no status to carry a condition
            kind, reason, message = verdict
            ssn.update_podgroup_condition(
                job,
                PodGroupCondition(
                    type=kind,
                    status="True",
                    transition_id=ssn.uid,
                    last_transition_time=ssn.now,
                    reason=reason,
                    message=message,
                ),
            )


_PLACED = (TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND)


def _verdict(job: Job) -> tuple[str, str, str] | None:
    """(condition type, reason, message) for a job at session close; None when an unready job's
    only shortfall is tasks still releasing their nodes."""
    if job.is_ready():
        return "Scheduled", READY_REASON, ""
    releasing = job.releasing_on_nodes()
    ready = job.ready_task_num() + job.pending_best_effort_num()
    if releasing and ready + releasing >= job.min_available:
        return None
    placeable = sum(
        1
        for t in job.by_status.get(TaskStatus.PENDING, {}).values()
        if t.last_transaction is not None and t.last_transaction.status in _PLACED
    )
    # never more than it has: a gang whose minMember exceeds its pods lacks pods, not room
    unready = min(job.min_available, len(job.tasks)) - (placeable + job.ready_task_num())
    message = f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {job_fit_error(job)}"
    job.fit_error = message
    return "Unschedulable", NOT_ENOUGH_RESOURCES, message
