"""All schedulable nodes of a snapshot as one table of numpy arrays.

Rows are nodes (sorted by name, which is also the documented tie-break order), columns are the
snapshot's resources. Accounting follows Volcano's NodeInfo: ``used`` holds every task placed on
the node (including releasing ones), ``idle = allocatable - used``, ``releasing`` is what evicted
tasks will give back, ``pipelined`` is what tasks waiting for that release have reserved, and
``future_idle = idle + releasing - pipelined``. All are kept current by :meth:`NodeTable.add_task`
and :meth:`NodeTable.remove_task`, so a fit check for one task over every node is a single
vectorised comparison. Every change appends the row to :attr:`NodeTable.changes`, so caches of
per-node results can refresh just the rows that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from caldera.api.resources import ResourceSpace, Vector
from caldera.api.task import Task, TaskStatus
from caldera.models.core import Taint

__all__ = ["Matrix", "NodeTable"]

T = TypeVar("T")
_MISSING = object()

Matrix = npt.NDArray[np.float64]


class NodeTable:
    __slots__ = (
        "_private",
        "affine",
        "allocatable",
        "annotations",
        "capacity",
        "changes",
        "future_idle",
        "idle",
        "images",
        "index",
        "labels",
        "names",
        "nonzero_used",
        "pipelined",
        "releasing",
        "space",
        "static",
        "taints",
        "tasks",
        "unschedulable",
        "used",
        "withheld",
    )

    def __init__(
        self,
        space: ResourceSpace,
        names: Sequence[str],
        allocatable: Matrix,
        labels: Sequence[dict[str, str]],
        taints: Sequence[tuple[Taint, ...]],
        unschedulable: Sequence[bool],
    ) -> None:
        n = len(names)
        self.space = space
        self.names: list[str] = list(names)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.allocatable = allocatable.reshape(n, len(space))
        self.used: Matrix = np.zeros_like(self.allocatable)
        self.idle: Matrix = self.allocatable.copy()
        self.releasing: Matrix = np.zeros_like(self.allocatable)
        self.pipelined: Matrix = np.zeros_like(self.allocatable)
        self.future_idle: Matrix = self.allocatable.copy()
        self.nonzero_used: Matrix = np.zeros((n, 2), dtype=np.float64)
        """(milli-cpu, memory) of placed pods with kube-scheduler's scoring defaults."""
        self.labels: list[dict[str, str]] = list(labels)
        self.taints: list[tuple[Taint, ...]] = list(taints)
        self.unschedulable: npt.NDArray[np.bool_] = np.array(unschedulable, dtype=bool)
        self.tasks: list[dict[str, Task]] = [{} for _ in range(n)]
        self.affine: dict[str, int] = {}
        """Tasks on the table whose pod has an affinity section: UID → row (inter-pod affinity
        reads only these to find the terms placed pods own)."""
        self.static: dict[object, Any] = {}
        """What plugins derive from the nodes' static columns alone (labels, taints): shared by
        the tables of every session while the nodes are the same objects (see
        :meth:`derived`), so it is worked out once per node set, not once per session."""
        self.changes: list[int] = []
        """Append-only log of rows whose accounting changed this session."""
        self.annotations: list[dict[str, str]] = [{} for _ in range(n)]
        self.withheld: list[dict[str, float]] = [{} for _ in range(n)]
        self.capacity: list[Mapping[str, float]] = [{} for _ in range(n)]
        """Per node, the capacity of the resources some device vendor lists its cards from
        (:data:`~caldera.devices.vendors.CAPACITY_NAMES`; usually empty)."""
        """Per node, the allocatable of resources left out of the space because a plugin
        accounts for them (device counts), as the node reports them."""
        """Per node, its annotations (device registrations); shared with the API objects, so
        read only."""
        self.images: list[dict[str, int]] = [{} for _ in range(n)]
        """Per node, image name → size in bytes (from ``status.images``; every name of an
        image is listed)."""
        self._private: set[int] | None = None
        """Rows of :attr:`tasks` this table may change in place (None: all). The others are
        shared with a model kept between sessions and copied before their first change."""

    def fresh(self) -> NodeTable:
        """A table of the same nodes with nothing on them, sharing this one's static columns
        (names, labels, taints, annotations, images...: never changed by a session), its rows
        of tasks shared and empty until :meth:`share_rows` or a first change."""
        out = object.__new__(NodeTable)
        for slot in _STATIC:
            setattr(out, slot, getattr(self, slot))
        alloc = self.allocatable
        out.used = np.zeros_like(alloc)
        out.idle = alloc.copy()
        out.releasing = np.zeros_like(alloc)
        out.pipelined = np.zeros_like(alloc)
        out.future_idle = alloc.copy()
        out.nonzero_used = np.zeros((len(self.names), 2), dtype=np.float64)
        out.share_rows([_EMPTY] * len(self.names))
        out.affine = {}
        out.changes = []
        return out

    def share_rows(self, rows: list[dict[str, Task]]) -> None:
        """Take ``rows`` as the tasks per node without copying them: each is copied before
        this table first changes it."""
        self.tasks = rows
        self._private = set()

    def _row(self, i: int) -> dict[str, Task]:
        private = self._private
        if private is not None and i not in private:
            self.tasks[i] = dict(self.tasks[i])
            private.add(i)
        return self.tasks[i]

    def __len__(self) -> int:
        return len(self.names)

    def add_task(self, i: int, task: Task) -> None:
        """Account ``task`` (in its current state) on node ``i``."""
        req = task.resreq
        if task.status is TaskStatus.PIPELINED:
            self.pipelined[i] += req
            self.future_idle[i] -= req
        else:
            self.used[i] += req
            self.idle[i] -= req
            if task.status is TaskStatus.RELEASING:
                self.releasing[i] += req
            else:
                self.future_idle[i] -= req
            self.nonzero_used[i, 0] += task.nonzero_cpu
            self.nonzero_used[i, 1] += task.nonzero_memory
        self._row(i)[task.uid] = task
        if task.spec.affinity is not None:
            self.affine[task.uid] = i
        self.changes.append(i)

    def add_tasks(self, rows: Sequence[int], tasks: Sequence[Task]) -> None:
        """:meth:`add_task` for each row and task in turn, each array summed in one call.

        ``ufunc.at`` adds unbuffered in the order given, so every row gets the same floats as
        the calls one by one would give it."""
        if not tasks:
            return
        r = np.fromiter(rows, dtype=np.intp, count=len(rows))
        req = np.array([t.resreq for t in tasks], dtype=np.float64).reshape(len(tasks), -1)
        status = [t.status for t in tasks]
        pipelined = np.array([s is TaskStatus.PIPELINED for s in status], dtype=bool)
        releasing = np.array([s is TaskStatus.RELEASING for s in status], dtype=bool)
        held = ~pipelined
        np.add.at(self.pipelined, r[pipelined], req[pipelined])
        np.add.at(self.used, r[held], req[held])
        np.subtract.at(self.idle, r[held], req[held])
        np.add.at(self.releasing, r[releasing], req[releasing])
        reserved = ~releasing  # pipelined ones and those held for good
        np.subtract.at(self.future_idle, r[reserved], req[reserved])
        nonzero = np.array([(t.nonzero_cpu, t.nonzero_memory) for t in tasks], dtype=np.float64)
        np.add.at(self.nonzero_used, r[held], nonzero[held])
        row = self._row
        for i, task in zip(rows, tasks, strict=True):
            row(i)[task.uid] = task
            if task.spec.affinity is not None:
                self.affine[task.uid] = i
        self.changes.extend(rows)

    def remove_task(self, i: int, task: Task) -> None:
        """Undo :meth:`add_task` for ``task`` in its current state."""
        req = task.resreq
        if task.status is TaskStatus.PIPELINED:
            self.pipelined[i] -= req
            self.future_idle[i] += req
        else:
            self.used[i] -= req
            self.idle[i] += req
            if task.status is TaskStatus.RELEASING:
                self.releasing[i] -= req
            else:
                self.future_idle[i] += req
            self.nonzero_used[i, 0] -= task.nonzero_cpu
            self.nonzero_used[i, 1] -= task.nonzero_memory
        del self._row(i)[task.uid]
        self.affine.pop(task.uid, None)
        self.changes.append(i)

    def derived(self, key: object, make: Callable[[], T]) -> T:
        """``make()``, worked out once per node set: it must read only the static columns and
        its result must never be changed (share arrays read-only)."""
        hit = self.static.get(key, _MISSING)
        if hit is _MISSING:
            hit = self.static[key] = make()
        return cast(T, hit)

    def lasting(self, key: object, make: Callable[[], T]) -> T:
        """A store a plugin keeps from session to session while the nodes stay the same (made by
        ``make()`` the first time), which its owner keeps current itself. Rows of
        :attr:`tasks` that are the same object as in an earlier session hold the same tasks in
        the same states (a session copies a row before changing it; the model makes a new row
        object when one of its pods changes), so what a plugin worked out from a row can be
        kept by the row's identity."""
        return self.derived(("lasting", key), make)

    def label_column(self, key: str) -> npt.NDArray[np.object_]:
        """The value of label ``key`` on every node (None where absent), built once per snapshot."""
        return self.derived(("label column", key), lambda: _column(self.labels, key))

    def topology(self, key: str) -> tuple[npt.NDArray[np.intp], int]:
        """The topology domains of label ``key``: (domain id of every node, number of domains D).

        Domains are the label's distinct values, numbered in sorted order; a node without the
        label gets id D. Counts per domain are kept in arrays of D + 1 entries whose last entry
        stays 0, so ``counts[ids]`` reads a count per node in one step (0 where the label is
        missing) and ``ids < D`` says which nodes have the label. Built once per snapshot."""
        return self.derived(("topology", key), lambda: _domains(self.label_column(key)))

    def total(self, outside: Vector | None = None) -> Vector:
        """The cluster's allocatable (and ``outside``, nodes not in the table that still count).
        An unfitted resource (a shared device's count) no node advertises is unbounded (inf):
        only what a queue names limits it."""
        total: Vector = self.allocatable.sum(axis=0)
        if outside is not None:
            total = total + outside
        fitted = self.space.fitted
        if fitted is not None:
            total = np.where(fitted | (total > 0), total, np.inf)
        return total


_EMPTY: dict[str, Task] = {}
"""The tasks of a row nothing was put on yet (shared: copied before a first change)."""

_STATIC = (
    "space",
    "names",
    "index",
    "allocatable",
    "labels",
    "taints",
    "unschedulable",
    "static",
    "annotations",
    "capacity",
    "withheld",
    "images",
)
"""What :meth:`NodeTable.fresh` shares: the columns that change only with the nodes."""


def _column(labels: Sequence[dict[str, str]], key: str) -> npt.NDArray[np.object_]:
    col = np.array([lbl.get(key) for lbl in labels], dtype=object)
    col.flags.writeable = False
    return col


def _domains(column: npt.NDArray[np.object_]) -> tuple[npt.NDArray[np.intp], int]:
    values = sorted({v for v in column if v is not None})
    ids = {v: i for i, v in enumerate(values)}
    dom = np.array([ids.get(v, len(values)) for v in column], dtype=np.intp)
    dom.flags.writeable = False
    return dom, len(values)
