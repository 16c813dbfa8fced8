"""The session's jobs as arrays, as they stand when the session opens.

Fair-share plugins open by summing every job into its queue (what each holds, what each was
admitted with, what each still asks for), and the session closes by summing them again. A loop
over jobs with a few numpy calls per job costs microseconds a job, so a cluster of thousands of
small running jobs paid tens of milliseconds a session for it. The table stacks the numbers once;
each plugin's sums are then a handful of array operations (``np.add.at`` adds rows in job order,
as the loops did).

The table is a picture of the jobs at open: the session's placements change the jobs, not it.

Its rows are the session's *active* jobs. The *settled* ones (:func:`is_settled`: every task
placed and running, nothing for the session to decide or to report) are most jobs of a busy
cluster; they enter the sums through :class:`SettledJobs`, per-queue totals the build keeps as
jobs settle and wake, so a session costs what its active jobs cost, not what the cluster holds.
The sums are of whole milli-CPUs and bytes: floats add those exactly in any order, so the totals
kept this way equal the ones a loop over every job gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from caldera.api.job import Job
from caldera.api.resources import ResourceSpace, Vector
from caldera.api.task import TaskStatus

__all__ = [
    "SETTLED_STATUSES",
    "JobTable",
    "Matrix",
    "SettledJobs",
    "is_settled",
    "partition",
    "sum_by_queue",
    "unsettle",
]

Matrix = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

SETTLED_STATUSES = frozenset(
    {TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.SUCCEEDED, TaskStatus.FAILED}
)
"""Task states that leave nothing to decide."""


def _owed(minimum: Matrix, allocated: Matrix) -> Matrix:
    """What of its ``minResources`` a job does not hold yet (admission counts it as held)."""
    return np.maximum(minimum - allocated, 0.0)


def _beyond(allocated: Matrix, minimum: Matrix | float) -> Matrix:
    """What a job holds past its ``minResources``."""
    return np.maximum(allocated - minimum, 0.0)


def is_settled(job: Job) -> bool:
    """Nothing about ``job`` for a session to decide or to write: an in-memory group (no
    PodGroup or Kubernetes PodGroup status to write), without network topology or sub-groups,
    Running and ready, each task running, bound or finished, no reason recorded. Every action
    passes over such a job unless it picks victims (those read :attr:`Session.jobs`, all jobs),
    and closing it writes nothing."""
    if job.foreign:
        return True  # another instance's: counted, never decided here
    if job.has_object or job.workload or job.network_topology is not None or job.subgroups:
        return False
    if job.phase != "Running" or not job.is_ready() or not job.tasks:
        return False
    if job.fit_error or job.nodes_fit_errors or job.topology_trace is not None:
        return False
    return all(s in SETTLED_STATUSES or not tasks for s, tasks in job.by_status.items())


class SettledJobs:
    """Per queue, what its settled jobs hold, as :class:`JobTable` would sum their rows: the
    allocation (also their request: they have nothing pending), what admission counts them as
    holding on top (:meth:`JobTable.admitted`) and what they hold past their ``minResources``.
    Kept from build to build: :meth:`add` a job when it settles, :meth:`remove` it when it
    changes or goes (as it was counted: a woken job's allocation at open)."""

    __slots__ = ("_members", "_sums", "admitted_total", "space", "woken")

    def __init__(self, space: ResourceSpace) -> None:
        self.space = space
        self._members: dict[str, tuple[str, int]] = {}
        """Settled job → (its queue, its allocated tasks when counted)."""
        self._sums: dict[str, tuple[int, Vector, Vector, Vector]] = {}
        """Per queue: (settled jobs, allocated, admitted, elastic)."""
        self.admitted_total = space.zeros()
        """The admitted sum over every queue (overcommit's ``inqueue``)."""
        self.woken: list[Job] = []
        """Settled jobs the session changed (at their first state change), in that order."""

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, uid: object) -> bool:
        return uid in self._members

    @staticmethod
    def parts(job: Job, allocated_tasks: int) -> tuple[Vector, Vector, Vector]:
        """(allocated, admitted, elastic) of one settled job (Running, so admitted is what of
        its ``minResources`` it does not hold once minMember tasks are placed)."""
        alloc = job.allocated_at_open()
        minimum = job.min_resources
        if minimum is None:
            return alloc, np.zeros_like(alloc), _beyond(alloc, 0.0)
        owed = (
            _owed(minimum, alloc) if allocated_tasks >= job.min_available else np.zeros_like(alloc)
        )
        return alloc, owed, _beyond(alloc, minimum)

    def add(self, job: Job) -> None:
        count = job.allocated_task_num()
        self._members[job.uid] = (job.queue, count)
        self._apply(job, job.queue, count, 1)
        self._mark(job)

    def remove(self, job: Job) -> None:
        """Take back what :meth:`add` counted for ``job``."""
        queue, count = self._members.pop(job.uid)
        self._apply(job, queue, count, -1)

    def _apply(self, job: Job, queue: str, count: int, sign: int) -> None:
        alloc, admitted, elastic = self.parts(job, count)
        kept = self._sums.get(queue)
        if kept is None:
            kept = (0, self.space.zeros(), self.space.zeros(), self.space.zeros())
        jobs = kept[0] + sign
        if jobs <= 0:
            self._sums.pop(queue, None)
        else:
            self._sums[queue] = (
                jobs,
                kept[1] + sign * alloc,
                kept[2] + sign * admitted,
                kept[3] + sign * elastic,
            )
        if job.min_resources is not None:
            self.admitted_total = self.admitted_total + sign * admitted

    @classmethod
    def of(cls, space: ResourceSpace, jobs: Sequence[Job]) -> SettledJobs:
        """The sums of ``jobs`` (all settled), worked out in a few array operations."""
        out = cls(space)
        if not jobs:
            return out
        table = JobTable(space, jobs)
        names = sorted(set(table.queues))
        allocated = table.sum_by(names, table.allocated)
        admitted = table.sum_by(names, table.admitted())
        elastic = table.sum_by(names, table.elastic())
        counts = dict.fromkeys(names, 0)
        for job, count in zip(jobs, table.allocated_tasks.tolist(), strict=True):
            out._members[job.uid] = (job.queue, count)
            counts[job.queue] += 1
            out._mark(job)
        for i, name in enumerate(names):
            out._sums[name] = (counts[name], allocated[i], admitted[i], elastic[i])
        out.admitted_total = table.total(table.admitted(), table.has_min)
        return out

    def _mark(self, job: Job) -> None:
        """``job`` is counted here: its allocation is what the sums hold (read only), and its
        first state change in a session wakes it (:meth:`Job.set_status`)."""
        job.allocated.flags.writeable = False
        job.settled = self.woken

    def queues(self) -> set[str]:
        """Queues with at least one settled job."""
        return set(self._sums)

    def by_queue(self, names: Sequence[str]) -> tuple[Matrix, Matrix, Matrix]:
        """(allocated, admitted, elastic) per name of ``names``."""
        out = np.zeros((3, len(names), len(self.space)), dtype=np.float64)
        for i, name in enumerate(names):
            kept = self._sums.get(name)
            if kept is not None:
                out[0, i], out[1, i], out[2, i] = kept[1], kept[2], kept[3]
        return out[0], out[1], out[2]


def partition(space: ResourceSpace, jobs: dict[str, Job]) -> tuple[dict[str, Job], SettledJobs]:
    """(the active jobs, in ``jobs`` order; the settled ones' sums)."""
    active: dict[str, Job] = {}
    settled: list[Job] = []
    for key, job in jobs.items():
        if is_settled(job):
            settled.append(job)
        else:
            active[key] = job
            unsettle(job)
    return active, SettledJobs.of(space, settled)


def unsettle(job: Job) -> None:
    """``job`` is active: forget that an earlier session counted it settled (its allocation
    becomes its own again)."""
    job.settled = job.at_open = None
    if not job.allocated.flags.writeable:
        job.allocated = job.allocated.copy()


class JobTable:
    """Rows are jobs in the session's job order of iteration (``ssn.jobs``)."""

    __slots__ = (
        "allocated",
        "allocated_tasks",
        "has_min",
        "inqueue",
        "jobs",
        "min_available",
        "minimum",
        "pending",
        "queues",
        "row",
        "running",
        "settled",
        "space",
    )

    def __init__(
        self, space: ResourceSpace, jobs: Sequence[Job], settled: SettledJobs | None = None
    ) -> None:
        n, width = len(jobs), len(space)
        zeros = space.zeros()
        self.space = space
        self.settled = settled if settled is not None else SettledJobs(space)
        """The settled jobs' sums (their jobs are not rows)."""
        self.jobs = list(jobs)
        self.row: dict[str, int] = {job.uid: i for i, job in enumerate(self.jobs)}
        self.queues: list[str] = [job.queue for job in self.jobs]
        self.allocated: Matrix = np.array(
            [job.allocated for job in self.jobs], dtype=np.float64
        ).reshape(n, width)
        """What each job's tasks hold (Allocated, Binding, Bound, Running)."""
        self.has_min: Mask = np.array([j.min_resources is not None for j in self.jobs], dtype=bool)
        self.minimum: Matrix = np.array(
            [zeros if j.min_resources is None else j.min_resources for j in self.jobs],
            dtype=np.float64,
        ).reshape(n, width)
        """``minResources`` (zeros where a job has none: see :attr:`has_min`)."""
        self.inqueue: Mask = np.array([j.phase == "Inqueue" for j in self.jobs], dtype=bool)
        self.running: Mask = np.array([j.phase == "Running" for j in self.jobs], dtype=bool)
        self.allocated_tasks = np.array([j.allocated_task_num() for j in self.jobs], dtype=np.int64)
        self.min_available = np.array([j.min_available for j in self.jobs], dtype=np.int64)
        self.pending: list[int] = [
            i for i, j in enumerate(self.jobs) if j.by_status.get(TaskStatus.PENDING)
        ]
        """Rows of the jobs with Pending tasks."""

    def __len__(self) -> int:
        return len(self.jobs)

    def pending_requests(self) -> Matrix:
        """Per job, its allocation plus the requests of its Pending tasks (``request`` in
        proportion.go's ``OnSessionOpen``): the jobs with pending tasks are few, the rest copy
        their allocation."""
        out = self.allocated.copy()
        for i in self.pending:
            for task in self.jobs[i].by_status[TaskStatus.PENDING].values():
                out[i] += task.resreq
        return out

    def admitted(self, *, inqueue_owed: bool = False) -> Matrix:
        """Per job, what admission counts it as holding on top of its allocation (the
        ``inqueue`` sums of ``OnSessionOpen`` in Volcano's proportion.go, capacity.go and
        overcommit.go): while Running with at least minMember tasks placed, what of its
        ``minResources`` it does not hold yet (``util.GetInqueueResource``); while Inqueue, its
        ``minResources`` (overcommit) or, with ``inqueue_owed``, what of them it does not hold
        yet, so the tasks it has placed but not yet started are not counted twice (proportion
        and capacity since volcano-sh/volcano 6db3122b4)."""
        owed = _owed(self.minimum, self.allocated)
        started = self.running & self.has_min & (self.allocated_tasks >= self.min_available)
        waiting = self.inqueue & self.has_min
        held_back = owed if inqueue_owed else self.minimum
        return np.where(waiting[:, None], held_back, np.where(started[:, None], owed, 0.0))

    def elastic(self) -> Matrix:
        """Per job, what it holds past its ``minResources`` (proportion's ``elastic`` sums)."""
        return _beyond(self.allocated, self.minimum)

    def queue_names(self) -> set[str]:
        """Every queue with a job, active or settled."""
        return set(self.queues) | self.settled.queues()

    def queue_sums(self, names: Sequence[str]) -> tuple[Matrix, Matrix, Matrix, Matrix]:
        """Per name of ``names``, over every job of that queue, settled ones included: (what
        the jobs hold, that plus their Pending requests, what admission counts them as
        holding, what they hold past their ``minResources``)."""
        allocated, admitted, elastic = self.settled.by_queue(names)
        allocated_active = self.sum_by(names, self.allocated)
        return (
            allocated + allocated_active,
            allocated + self.sum_by(names, self.pending_requests()),
            admitted + self.sum_by(names, self.admitted(inqueue_owed=True)),
            elastic + self.sum_by(names, self.elastic()),
        )

    def allocated_by_queue(self, names: Sequence[str]) -> Matrix:
        """Per name of ``names``, what every job of that queue holds, settled ones included."""
        return self.settled.by_queue(names)[0] + self.sum_by(names, self.allocated)

    def total_admitted(self) -> Vector:
        """What admission counts every job with ``minResources`` as holding (overcommit)."""
        active: Vector = self.total(self.admitted(), self.has_min) + self.settled.admitted_total
        return active

    def sum_by(self, names: Sequence[str], values: Matrix, where: Mask | None = None) -> Matrix:
        """Per name of ``names``, the sum of ``values`` over the jobs of that queue (rows of
        queues not in ``names`` are left out), added in job order."""
        return sum_by_queue(self.queues, names, values, where)

    def total(self, values: Matrix, where: Mask | None = None) -> Vector:
        """The sum of ``values`` over all jobs (those ``where`` says), added in job order."""
        rows = values if where is None else values[where]
        out: Matrix = np.zeros((1, len(self.space)), dtype=np.float64)
        np.add.at(out, np.zeros(len(rows), dtype=np.intp), rows)
        total: Vector = out[0]
        return total


def sum_by_queue(
    queues: Sequence[str], names: Sequence[str], values: Matrix, where: Mask | None = None
) -> Matrix:
    """Rows of ``values`` (one per job, whose queue ``queues`` names) summed per name of
    ``names``, in job order; jobs of other queues (and those ``where`` leaves out) are not."""
    index = {name: i for i, name in enumerate(names)}
    rows = np.array([index.get(q, -1) for q in queues], dtype=np.intp)
    keep = rows >= 0
    if where is not None:
        keep &= where
    out = np.zeros((len(names), values.shape[1]), dtype=np.float64)
    np.add.at(out, rows[keep], values[keep])
    return out
