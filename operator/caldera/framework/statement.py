"""A statement: an undo log of placement decisions for one job.

Actions stage allocations, pipelines and evictions in a statement and then either commit them
(allocations become binds, evictions become evictions) or discard them, undoing every operation in
reverse order so the session is exactly as before. A gang that is pipelined but not ready is
neither: its reservations stay in the session (so later jobs cannot take them) and vanish with it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from caldera.api.task import Task, TaskStatus, Transaction

__all__ = ["Op", "Placer", "Statement"]


class Placer(Protocol):
    """The session's placement primitives, all a statement stages and undoes through."""

    def place(self, task: Task, node: int, status: TaskStatus) -> None: ...
    def unplace(self, task: Task) -> None: ...
    def release(self, task: Task) -> None: ...
    def unrelease(self, task: Task, previous: TaskStatus) -> None: ...
    def bind(self, task: Task) -> None: ...
    def evict(self, task: Task, reason: str, preemptor: str = "") -> None: ...


class Op(enum.Enum):
    ALLOCATE = "Allocate"
    PIPELINE = "Pipeline"
    EVICT = "Evict"


@dataclass(slots=True)
class _Entry:
    op: Op
    task: Task
    reason: str = ""
    previous: TaskStatus = TaskStatus.PENDING
    preemptor: str = ""


class Statement:
    __slots__ = ("_ops", "_ssn")

    def __init__(self, ssn: Placer) -> None:
        self._ssn = ssn
        self._ops: list[_Entry] = []

    def __len__(self) -> int:
        return len(self._ops)

    def allocate(self, task: Task, node: int) -> None:
        self._ssn.place(task, node, TaskStatus.ALLOCATED)
        self._ops.append(_Entry(Op.ALLOCATE, task))

    def pipeline(self, task: Task, node: int, eviction_occurred: bool = False) -> None:
        """Pipeline ``task`` onto ``node`` (``Statement.Pipeline``); ``eviction_occurred``:
        pods were evicted there for it, so its pod will be nominated to the node."""
        task.eviction_occurred = eviction_occurred
        self._ssn.place(task, node, TaskStatus.PIPELINED)
        self._ops.append(_Entry(Op.PIPELINE, task))

    def evict(self, task: Task, reason: str, preemptor: str = "") -> None:
        """Evict ``task`` (for ``preemptor``, ``namespace/name``, if any)."""
        previous = task.status
        self._ssn.release(task)
        self._ops.append(_Entry(Op.EVICT, task, reason, previous, preemptor))

    def reprieve(self, task: Task) -> None:
        """Undo this statement's eviction of ``task`` alone (it stays where it runs)."""
        for i in range(len(self._ops) - 1, -1, -1):
            entry = self._ops[i]
            if entry.op is Op.EVICT and entry.task is task:
                del self._ops[i]
                self._ssn.unrelease(task, entry.previous)
                return
        raise ValueError(f"{task.key} was not evicted by this statement")

    def evicted(self) -> list[Task]:
        """The tasks this statement evicts, oldest first."""
        return [e.task for e in self._ops if e.op is Op.EVICT]

    def absorb(self, other: Statement) -> None:
        """Take over ``other``'s operations (a sub-group's placement joins its job's)."""
        self._ops.extend(other._ops)
        other._ops.clear()

    def discard(self) -> None:
        """Undo every operation, newest first."""
        ssn = self._ssn
        for entry in reversed(self._ops):
            task = entry.task
            if entry.op is Op.EVICT:
                ssn.unrelease(task, entry.previous)
            else:
                task.last_transaction = Transaction(
                    task.status, task.node_name, task.eviction_occurred
                )
                task.eviction_occurred = False
                ssn.unplace(task)
        self._ops.clear()

    def commit(self) -> None:
        """Hand allocations to the binder and evictions to the evictor, oldest first."""
        ssn = self._ssn
        for entry in self._ops:
            if entry.op is Op.ALLOCATE:
                ssn.bind(entry.task)
            elif entry.op is Op.EVICT:
                ssn.evict(entry.task, entry.reason, entry.preemptor)
        self._ops.clear()
