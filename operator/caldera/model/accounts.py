"""The node accounting of every placed pod, kept from session to session.

A snapshot's node table starts with every pod that holds room on a node added to it: tens of
thousands of tasks summed into the ``used``/``idle``/... arrays at every session. The model keeps
those sums instead: a row is worked out again only when one of its tasks is taken out or put in,
from its tasks in pod order, exactly as :meth:`NodeTable.add_tasks` sums them (so the floats are
the same, not just close). Each session gets copies (:meth:`Accounts.fill`) it may change at will.
"""

from __future__ import annotations

import numpy as np

from caldera.api.node import Matrix, NodeTable
from caldera.api.task import Task, TaskStatus

__all__ = ["Accounts"]

_COLUMNS = ("used", "idle", "releasing", "pipelined", "future_idle", "nonzero_used")
"""The node table's accounting columns (:class:`~caldera.api.node.NodeTable`)."""


class Accounts:
    """The accounting columns of a node table and its tasks per row, as built (before any
    session changed them)."""

    __slots__ = (
        "_dirty",
        "affine",
        "allocatable",
        "future_idle",
        "idle",
        "nonzero_used",
        "pipelined",
        "releasing",
        "tasks",
        "used",
        "where",
    )

    used: Matrix
    idle: Matrix
    releasing: Matrix
    pipelined: Matrix
    future_idle: Matrix
    nonzero_used: Matrix

    def __init__(self, table: NodeTable) -> None:
        """The accounting of ``table``, freshly built (no session has run on it yet)."""
        self.allocatable: Matrix = table.allocatable
        for column in _COLUMNS:
            setattr(self, column, getattr(table, column).copy())
        # the rows themselves: the freshly built table shares them and copies one before its
        # session changes it, as these accounts copy one before they change it (``_own``)
        self.tasks: list[dict[str, Task]] = list(table.tasks)
        self.affine: dict[str, int] = dict(table.affine)
        self.where: dict[str, int] = {
            uid: row for row, tasks in enumerate(self.tasks) for uid in tasks
        }
        """Task UID → its row."""
        self._dirty: set[int] = set()

    def take_out(self, task: Task) -> None:
        """Forget ``task`` (nothing if it holds no room, or another task of the same pod does:
        a pod may leave its job's task for a task of its own in the same build)."""
        uid = task.uid
        row = self.where.get(uid)
        if row is not None and self.tasks[row].get(uid) is task:
            del self.where[uid]
            self._own(row)
            del self.tasks[row][uid]
            self.affine.pop(uid, None)
            self._dirty.add(row)

    def put_in(self, row: int, task: Task) -> None:
        self._own(row)
        self.tasks[row][task.uid] = task
        self.where[task.uid] = row
        self._dirty.add(row)

    def reallocate(self, allocatable: Matrix) -> None:
        """The same nodes in the same rows with new allocatable (a node changed, but not which
        nodes there are): the rows whose allocatable differs are summed again."""
        if allocatable is self.allocatable:
            return
        differ = np.flatnonzero((allocatable != self.allocatable).any(axis=1))
        self.allocatable = allocatable
        for row in differ.tolist():
            self._own(row)

    def _own(self, row: int) -> None:
        """Copy row ``row`` before changing it: the last session's table may still hold it."""
        if row not in self._dirty:
            self.tasks[row] = dict(self.tasks[row])
            self._dirty.add(row)

    def _settle(self) -> None:
        """Work out again the rows that changed, their tasks in pod order."""
        if not self._dirty:
            return
        affine_changed = False
        for row in sorted(self._dirty):
            tasks = self.tasks[row] = dict(
                sorted(self.tasks[row].items(), key=lambda item: item[1].key)
            )
            alloc = self.allocatable[row]
            used = np.zeros_like(alloc)
            idle = alloc.copy()
            releasing = np.zeros_like(alloc)
            pipelined = np.zeros_like(alloc)
            future = alloc.copy()
            cpu = memory = 0.0
            for task in tasks.values():
                req = task.resreq
                if task.status is TaskStatus.PIPELINED:
                    pipelined += req
                    future -= req
                else:
                    used += req
                    idle -= req
                    if task.status is TaskStatus.RELEASING:
                        releasing += req
                    else:
                        future -= req
                    cpu += task.nonzero_cpu
                    memory += task.nonzero_memory
                if task.spec.affinity is not None and task.uid not in self.affine:
                    self.affine[task.uid] = row
                    affine_changed = True
            self.used[row], self.idle[row], self.releasing[row] = used, idle, releasing
            self.pipelined[row], self.future_idle[row] = pipelined, future
            self.nonzero_used[row] = (cpu, memory)
        self._dirty.clear()
        if affine_changed:  # in pod order, as a table built at once lists them
            tasks_of = self.tasks
            self.affine = dict(
                sorted(self.affine.items(), key=lambda item: tasks_of[item[1]][item[0]].key)
            )

    def fill(self, table: NodeTable) -> None:
        """Give ``table`` (fresh, nothing on it, the same nodes) copies of the accounting."""
        self._settle()
        for column in _COLUMNS:
            setattr(table, column, getattr(self, column).copy())
        table.share_rows(list(self.tasks))  # a row is copied before the session changes it
        table.affine = dict(self.affine)
