"""The session's jobs as arrays, as they stand when the session opens.

Fair-share plugins open by summing every job into its queue (what each holds, what each was
admitted with, what each still asks for), and the session closes by summing them again. A loop
over jobs with a few numpy calls per job costs microseconds a job, so a cluster of thousands of
small running jobs paid tens of milliseconds a session for it. The table stacks the numbers once;
each plugin's sums are then a handful of array operations (``np.add.at`` adds rows in job order,
as the loops did).

The table is a picture of the jobs at open: the session's placements change the jobs, not it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from caldera.api.job import Job
from caldera.api.resources import ResourceSpace, Vector
from caldera.api.task import TaskStatus

__all__ = ["JobTable", "Matrix", "sum_by_queue"]

Matrix = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]


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
        "space",
    )

    def __init__(self, space: ResourceSpace, jobs: Sequence[Job]) -> None:
        n, width = len(jobs), len(space)
        zeros = space.zeros()
        self.space = space
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

    def admitted(self) -> Matrix:
        """Per job, what admission counts it as holding on top of its allocation (the
        ``inqueue`` sums of ``OnSessionOpen`` in Volcano's proportion.go and overcommit.go):
        ``minResources`` while Inqueue; while Running with at least minMember tasks placed, what
        of its ``minResources`` it does not hold yet."""
        owed = np.where(
            (self.running & self.has_min & (self.allocated_tasks >= self.min_available))[:, None],
            np.maximum(self.minimum - self.allocated, 0.0),
            0.0,
        )
        return np.where((self.inqueue & self.has_min)[:, None], self.minimum, owed)

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
