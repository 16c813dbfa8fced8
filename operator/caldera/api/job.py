"""A job is a PodGroup and its tasks: the unit of gang scheduling.

The job keeps its tasks indexed by state and a running sum of what its placed tasks hold, so gang
checks (ready, pipelined, starving) and fair-share numbers are O(1) per call. All state changes go
through :meth:`Job.set_status`, which keeps those indexes right.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from caldera.api.fiterror import FitErrors
from caldera.api.hypernode import TopologyTrace
from caldera.api.resources import Vector
from caldera.api.task import ALLOCATED_STATUSES, Task, TaskStatus
from caldera.models.volcano import NetworkTopologySpec, PodGroupCondition, PodGroupStatus

__all__ = ["READY_STATUSES", "VALID_STATUSES", "Job", "SubGroup", "ValidateResult"]

READY_STATUSES = frozenset(ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED})
VALID_STATUSES = frozenset(READY_STATUSES | {TaskStatus.PIPELINED, TaskStatus.PENDING})


@dataclass(slots=True, frozen=True)
class ValidateResult:
    """Why a job may not be scheduled at all this session (gang's JobValid)."""

    reason: str
    message: str


@dataclass(slots=True, eq=False)
class SubGroup:
    """Pods of one job that a ``subGroupPolicy`` groups together (its label selector, and the
    same values of its ``matchLabelKeys``): a gang of ``size`` inside the job, placed under the
    policy's ``networkTopology``."""

    policy: str
    name: str
    """``<policy>-<the matchLabelKeys values joined by '-'>``, as Volcano names sub-jobs."""
    size: int
    topology: NetworkTopologySpec | None
    tasks: list[str] = field(default_factory=list)
    """UIDs of the job's tasks in this sub-group."""

    def placed(self, job: Job, statuses: frozenset[TaskStatus]) -> int:
        return sum(1 for uid in self.tasks if job.tasks[uid].status in statuses)


@dataclass(slots=True, eq=False)
class Job:
    uid: str
    """``<namespace>/<podgroup name>``, Volcano's job ID."""
    namespace: str
    name: str
    queue: str
    priority: int
    min_available: int
    min_task_member: dict[str, int]
    min_resources: Vector | None
    creation: float
    phase: str
    """PodGroup phase; the enqueue and allocate actions move it within a session."""
    annotations: dict[str, str]
    conditions: list[PodGroupCondition]
    allocated: Vector
    """Sum of requests of tasks in an allocated state (Allocated, Binding, Bound, Running)."""
    api_status: PodGroupStatus
    """The PodGroup status as the API holds it, to write only what changed."""
    network_topology: NetworkTopologySpec | None = None
    """Where in the HyperNode tree the job may be placed (``spec.networkTopology``)."""
    subgroups: list[SubGroup] = field(default_factory=list)
    min_subgroups: dict[str, int] = field(default_factory=dict)
    """Per ``subGroupPolicy``, how many of its sub-groups must be whole for the job to run."""
    topology_trace: TopologyTrace | None = None
    """The HyperNode search of this session (placed, or why not)."""
    has_object: bool = True
    """False for the in-memory group of bare pods: there is no PodGroup to write status to."""
    workload: bool = False
    """The job of a Kubernetes PodGroup (``scheduling.k8s.io``): its status is written there,
    as kube-scheduler writes it."""
    foreign: bool = False
    """Another scheduler instance's job (a hash split): its placed pods count for its queue, so
    queue shares hold for the cluster; it is never placed, and its status is never written."""
    min_resource_list: Mapping[str, float] | None = None
    """The PodGroup's ``minResources`` as written, quota spellings (``requests.cpu``) included,
    in engine units: what the resourcequota plugin reads (``min_resources`` holds only what the
    scheduler accounts)."""
    tasks: dict[str, Task] = field(default_factory=dict)
    by_status: dict[TaskStatus, dict[str, Task]] = field(default_factory=dict)
    nodes_fit_errors: dict[str, FitErrors] = field(default_factory=dict)
    fit_error: str = ""
    """The job-level reason (set when enqueue rejects it, or by gang at close)."""
    touched: bool = False
    """A session changed the state of one of its tasks (the next build makes the job anew)."""
    settled: list[Job] | None = None
    """Set while the job is *settled* (:func:`caldera.api.jobtable.is_settled`: nothing of it
    to decide, only sums to count): the list of settled jobs the session woke. Its first state
    change appends the job there, keeps its allocation at open in :attr:`at_open` (the sums
    hold it) and clears this."""
    at_open: Vector | None = None
    """The allocation of a settled job when the session opened, once a state change woke it."""
    _ready: int = 0
    _allocated: int = 0
    _valid: int = 0
    _waiting: int = 0
    _pending_best_effort: int = 0

    def _count(self, task: Task, sign: int) -> None:
        status = task.status
        if status in ALLOCATED_STATUSES:
            if sign > 0:  # in place, without a scaled copy of the request first
                self.allocated += task.resreq
            else:
                self.allocated -= task.resreq
            self._allocated += sign
        if status in READY_STATUSES:
            self._ready += sign
        if status in VALID_STATUSES:
            self._valid += sign
        if status is TaskStatus.PIPELINED:
            self._waiting += sign
        elif status is TaskStatus.PENDING and task.best_effort:
            self._pending_best_effort += sign

    def add_task(self, task: Task) -> None:
        self.tasks[task.uid] = task
        self.by_status.setdefault(task.status, {})[task.uid] = task
        self._count(task, 1)

    def set_status(self, task: Task, status: TaskStatus) -> None:
        if task.status is status:
            return
        if self.settled is not None:
            self._wake(self.settled)
        self.touched = True
        self._count(task, -1)
        del self.by_status[task.status][task.uid]
        self.by_status.setdefault(status, {})[task.uid] = task
        task.status = status
        self._count(task, 1)

    def _wake(self, woken: list[Job]) -> None:
        """The session changes a settled job: the allocation the sums counted stays as it was
        (it is shared, read only) and the job's own becomes a copy."""
        woken.append(self)
        self.settled = None
        self.at_open = self.allocated
        self.allocated = self.allocated.copy()

    def allocated_at_open(self) -> Vector:
        """What the job held when the session opened (before any of its tasks moved, for a job
        that was settled)."""
        return self.allocated if self.at_open is None else self.at_open

    def count(self, *statuses: TaskStatus) -> int:
        return sum(len(self.by_status.get(s, ())) for s in statuses)

    def node_rows(
        self, statuses: frozenset[TaskStatus] | None = None, among: Iterable[str] | None = None
    ) -> npt.NDArray[np.intp]:
        """The node rows (sorted, distinct) of the job's tasks on a node: those in ``statuses``
        (None: any), of the task UIDs ``among`` (None: all)."""
        tasks = self.tasks.values() if among is None else (self.tasks[u] for u in among)
        rows = {t.node for t in tasks if t.node >= 0 and (statuses is None or t.status in statuses)}
        return np.array(sorted(rows), dtype=np.intp)

    def tasks_in(self, status: TaskStatus) -> list[Task]:
        return list(self.by_status.get(status, {}).values())

    def placeable(self) -> list[Task]:
        """Pending tasks no scheduling gate holds: those an action may place."""
        return [t for t in self.by_status.get(TaskStatus.PENDING, {}).values() if not t.gated]

    def allocated_task_num(self) -> int:
        """Tasks Allocated, Binding, Bound or Running (Volcano's ``CalculateAllocatedTaskNum``)."""
        return self._allocated

    def ready_task_num(self) -> int:
        """Tasks Allocated, Binding, Bound, Running or Succeeded."""
        return self._ready

    def waiting_task_num(self) -> int:
        """Tasks Pipelined."""
        return self._waiting

    def valid_task_num(self) -> int:
        """Tasks that can still count toward the gang (ready, pipelined or pending)."""
        return self._valid

    def pending_best_effort_num(self) -> int:
        return self._pending_best_effort

    def is_ready(self) -> bool:
        return self._ready + self._pending_best_effort >= self.min_available

    def is_pipelined(self) -> bool:
        return self._waiting + self._ready + self._pending_best_effort >= self.min_available

    def is_starving(self) -> bool:
        return self._waiting + self._ready < self.min_available

    def releasing_on_nodes(self) -> int:
        """Releasing tasks that still occupy a node."""
        return sum(1 for t in self.by_status.get(TaskStatus.RELEASING, {}).values() if t.node_name)

    def is_pending(self) -> bool:
        return self.phase in ("Pending", "")

    def role_counts(
        self, statuses: frozenset[TaskStatus], *, pending_best_effort: bool = False
    ) -> dict[str, int]:
        """Tasks per role in ``statuses`` (plus pending best-effort tasks, if asked)."""
        counts: dict[str, int] = {}
        for status in statuses:
            for task in self.by_status.get(status, {}).values():
                counts[task.role] = counts.get(task.role, 0) + 1
        if pending_best_effort and TaskStatus.PENDING not in statuses:
            for task in self.by_status.get(TaskStatus.PENDING, {}).values():
                if task.best_effort:
                    counts[task.role] = counts.get(task.role, 0) + 1
        return counts

    def role_checks_apply(self) -> bool:
        """Volcano checks ``minTaskMember`` only when minMember covers the sum of the role
        minimums; a smaller minMember means any mix of roles may make up the gang."""
        return bool(self.min_task_member) and self.min_available >= sum(
            self.min_task_member.values()
        )

    def roles_meet_minimum(
        self, statuses: frozenset[TaskStatus], *, pending_best_effort: bool = False
    ) -> bool:
        """Every role named in ``minTaskMember`` has at least that many tasks in ``statuses``
        (Volcano's CheckTaskValid/Ready/Pipelined; skipped when the checks do not apply)."""
        if not self.role_checks_apply():
            return True
        counts = self.role_counts(statuses, pending_best_effort=pending_best_effort)
        return all(counts.get(role, 0) >= need for role, need in self.min_task_member.items())

    def subgroups_meet_minimum(self, statuses: frozenset[TaskStatus]) -> bool:
        """Every ``subGroupPolicy`` has at least ``minSubGroups`` sub-groups with ``subGroupSize``
        tasks in ``statuses`` (Volcano 1.14's sub-job gang)."""
        if not self.min_subgroups:
            return True
        whole: dict[str, int] = {}
        for sg in self.subgroups:
            if sg.placed(self, statuses) >= sg.size:
                whole[sg.policy] = whole.get(sg.policy, 0) + 1
        return all(whole.get(p, 0) >= n for p, n in self.min_subgroups.items())

    def need_continue_allocating(self, failed_roles: set[str]) -> bool:
        """After a task fit no node: may placing the job's other tasks still make it ready?

        Volcano's ``NeedContinueAllocating``. Tasks of a role that already failed are assumed to
        fail too. With minMember equal to the task count every task is needed, so no. When the
        role minimums do not apply, the job can still be ready if its placed tasks plus the pending
        tasks of roles that have not failed reach minMember. Otherwise every failed role must
        already have its ``minTaskMember`` placed.
        """
        if self.min_available == len(self.tasks):
            return False
        if self.min_task_member and not self.role_checks_apply():
            left = sum(
                1
                for t in self.by_status.get(TaskStatus.PENDING, {}).values()
                if t.role not in failed_roles and not t.best_effort
            )
            return self._ready + self._pending_best_effort + left >= self.min_available
        placed = self.role_counts(READY_STATUSES, pending_best_effort=True)
        return all(
            placed.get(role, 0) >= self.min_task_member.get(role, 0) for role in failed_roles
        )

    @property
    def best_effort(self) -> bool:
        return self.min_resources is None
