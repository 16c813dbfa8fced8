"""kube-scheduler's resource scorers, vectorised over candidate nodes.

Integer arithmetic exactly as kube-scheduler does it (quantities are whole millicores and bytes,
exact in float64): LeastAllocated and MostAllocated use the *non-zero* requests (a container that
states no cpu/memory counts 100m/200Mi) over cpu and memory with equal weights; BalancedAllocation
uses actual requests over cpu, memory and ``nvidia.com/gpu`` (Volcano's configuration); its balance
is ``trunc((1 − std of the requested fractions) × 100)`` and, as of Kubernetes 1.36, the score is
the change the pod makes to it: ``50 + (50 + balance with pod − balance without) / 2`` in integers
(75 when the pod leaves the balance as it is). Resources a node does not have are left out for that
node, and so is an extended resource (``nvidia.com/gpu``) the pod does not request, as
kube-scheduler's ``calculateResourceAllocatableRequest`` does.

Complexity per task: each costs O(C) numpy work for C rows; as per-node scorers they run through
the session's score cache, so after a workload's first pod only the rows that changed are scored.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from caldera.api.node import Matrix, NodeTable
from caldera.api.resources import CPU, CPU_MEMORY, MEMORY, ResourceSpace, Vector
from caldera.api.task import Task
from caldera.framework.session import IntArray

__all__ = ["balanced_resource", "least_requested", "most_requested"]

MAX = 100.0
GPU = "nvidia.com/gpu"
Scorer = Callable[[Task, IntArray], Vector]


class _CpuMemory:
    """Per node, what the cpu/memory scorers read of its allocatable, computed once per session
    (allocatable does not change within one): a task is then scored on a few rows with a handful
    of numpy calls, which is what the score cache asks of it after each placement."""

    __slots__ = ("alloc", "both", "count", "divisor")

    def __init__(self, table: NodeTable) -> None:
        self.alloc: Matrix = np.ascontiguousarray(table.allocatable[:, CPU_MEMORY])
        present = self.alloc > 0
        self.divisor: Matrix = np.where(present, self.alloc, 1.0)
        """Allocatable with 1 where there is none (a node without the resource scores 0 on it
        by the formulas themselves, so no mask is needed)."""
        self.count: Vector = np.maximum(present.sum(axis=1), 1).astype(np.float64)
        """How many of cpu and memory each node has (at least 1: the mean's divisor)."""
        self.both: npt.NDArray[np.bool_] = np.all(present, axis=1)


def _nonzero_requested(table: NodeTable, task: Task, idx: IntArray) -> Matrix:
    """rows × (cpu, memory) requested with the task, with kube's non-zero defaults."""
    requested: Matrix = table.nonzero_used[idx] + (task.nonzero_cpu, task.nonzero_memory)
    return requested


def least_requested(table: NodeTable) -> Scorer:
    node = _CpuMemory(table)

    def score(task: Task, idx: IntArray) -> Vector:
        req, alloc = _nonzero_requested(table, task, idx), node.alloc[idx]
        s = np.floor_divide((alloc - req) * MAX, node.divisor[idx])
        s[req > alloc] = 0.0  # also every resource the node lacks (alloc 0, request above it)
        mean: Vector = np.floor_divide(s.sum(axis=1), node.count[idx])
        return mean

    return score


def most_requested(table: NodeTable) -> Scorer:
    node = _CpuMemory(table)

    def score(task: Task, idx: IntArray) -> Vector:
        req, alloc = _nonzero_requested(table, task, idx), node.alloc[idx]
        s = np.floor_divide(np.minimum(req, alloc) * MAX, node.divisor[idx])
        mean: Vector = np.floor_divide(s.sum(axis=1), node.count[idx])
        return mean

    return score


def _change(with_pod: Vector, without_pod: Vector) -> Vector:
    """Kubernetes 1.36 scores the change in balance: 75 for no change, towards 100 for a node
    the pod balances, towards 50 for one it unbalances (integer arithmetic)."""
    change: Vector = MAX // 2 + np.floor_divide(MAX // 2 + with_pod - without_pod, 2)
    return change


def balanced_resource(table: NodeTable, space: ResourceSpace) -> Scorer:
    names = [r for r in (CPU, MEMORY, GPU) if r in space.index]
    cols = np.array([space.index[r] for r in names], dtype=np.intp)
    extended = np.array([r not in (CPU, MEMORY) for r in names], dtype=bool)
    gpu = space.index.get(GPU)
    node = _CpuMemory(table)

    def balance(req: Matrix, alloc: Matrix, present: npt.NDArray[np.bool_]) -> Vector:
        """``trunc((1 − std of the requested fractions) × 100)`` per node."""
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.minimum(np.where(present, req / np.where(present, alloc, 1.0), 0.0), 1.0)
        count = present.sum(axis=1)
        n = np.maximum(count, 1)
        mean = frac.sum(axis=1) / n
        dev = np.where(present, frac - mean[:, None], 0.0)
        general = np.sqrt((dev * dev).sum(axis=1) / n)
        # kube special-cases exactly two resources as |a - b| / 2; max − min is that
        # difference computed exactly as kube does (a − b rounds the same as b − a)
        with np.errstate(invalid="ignore"):
            pair = (
                np.where(present, frac, -np.inf).max(axis=1)
                - np.where(present, frac, np.inf).min(axis=1)
            ) / 2
        std = np.where(count > 2, general, np.where(count == 2, pair, 0.0))
        return np.trunc((1.0 - std) * MAX)

    def with_gpu(task: Task, idx: IntArray) -> Vector:
        alloc = table.allocatable[np.ix_(idx, cols)]
        used = table.used[np.ix_(idx, cols)]
        # kube skips an extended resource the pod does not request
        present = (alloc > 0) & ~(extended & (task.resreq[cols] == 0))
        # both balances in one pass: the rows with the pod, then the same rows without it
        both = balance(
            np.concatenate((used + task.resreq[cols], used)),
            np.concatenate((alloc, alloc)),
            np.concatenate((present, present)),
        )
        return _change(both[: len(idx)], both[len(idx) :])

    def score(task: Task, idx: IntArray) -> Vector:
        if gpu is not None and task.resreq[gpu] != 0:
            return with_gpu(task, idx)
        # cpu and memory only: the std of two fractions is |a − b| / 2 on a node that has
        # both, 0 on one that lacks either; the rows with the pod, then the same rows without
        used = table.used[idx, CPU_MEMORY]
        frac = np.minimum(np.stack((used + task.resreq[CPU_MEMORY], used)) / node.divisor[idx], 1.0)
        std = np.where(node.both[idx], np.abs(frac[..., 0] - frac[..., 1]) / 2, 0.0)
        with_pod, without_pod = np.trunc((1.0 - std) * MAX)
        return _change(with_pod, without_pod)

    return score
