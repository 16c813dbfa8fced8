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
from caldera.api.resources import CPU, MEMORY, ResourceSpace, Vector
from caldera.api.task import Task
from caldera.framework.session import IntArray

__all__ = ["balanced_resource", "least_requested", "most_requested"]

MAX = 100.0
GPU = "nvidia.com/gpu"
Scorer = Callable[[Task, IntArray], Vector]


def _mean_over_present(scores: Matrix, present: npt.NDArray[np.bool_]) -> Vector:
    """Integer mean over the resources each node has (kube: skip zero allocatable)."""
    count = present.sum(axis=1)
    total = np.where(present, scores, 0.0).sum(axis=1)
    mean: Vector = np.where(count > 0, np.floor_divide(total, np.maximum(count, 1)), 0.0)
    return mean


def _nonzero(table: NodeTable, task: Task, idx: IntArray) -> tuple[Matrix, Matrix]:
    """(requested, allocatable) as rows × (cpu, memory), with kube's non-zero defaults."""
    cols = np.array([table.space.index[CPU], table.space.index[MEMORY]], dtype=np.intp)
    requested = table.nonzero_used[idx] + (task.nonzero_cpu, task.nonzero_memory)
    return requested, table.allocatable[np.ix_(idx, cols)]


def least_requested(table: NodeTable) -> Scorer:
    def score(task: Task, idx: IntArray) -> Vector:
        req, alloc = _nonzero(table, task, idx)
        present = alloc > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.floor_divide((alloc - req) * MAX, np.where(present, alloc, 1.0))
        return _mean_over_present(np.where(req > alloc, 0.0, s), present)

    return score


def most_requested(table: NodeTable) -> Scorer:
    def score(task: Task, idx: IntArray) -> Vector:
        req, alloc = _nonzero(table, task, idx)
        present = alloc > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.floor_divide(np.minimum(req, alloc) * MAX, np.where(present, alloc, 1.0))
        return _mean_over_present(s, present)

    return score


def balanced_resource(table: NodeTable, space: ResourceSpace) -> Scorer:
    names = [r for r in (CPU, MEMORY, GPU) if r in space.index]
    cols = np.array([space.index[r] for r in names], dtype=np.intp)
    extended = np.array([r not in (CPU, MEMORY) for r in names], dtype=bool)

    def balance(req: Matrix, alloc: Matrix, present: npt.NDArray[np.bool_]) -> Vector:
        """``trunc((1 − std of the requested fractions) × 100)`` per node."""
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.minimum(np.where(present, req / np.where(present, alloc, 1.0), 0.0), 1.0)
        count = present.sum(axis=1)
        if frac.shape[1] == 2:
            std = np.where(count == 2, np.abs(frac[:, 0] - frac[:, 1]) / 2, 0.0)
        else:
            n = np.maximum(count, 1)
            mean = frac.sum(axis=1) / n
            dev = np.where(present, frac - mean[:, None], 0.0)
            general = np.sqrt((dev * dev).sum(axis=1) / n)
            two = count == 2
            # kube special-cases exactly two resources as |a - b| / 2; max − min is that
            # difference computed exactly as kube does (a − b rounds the same as b − a)
            with np.errstate(invalid="ignore"):
                pair = (
                    np.where(present, frac, -np.inf).max(axis=1)
                    - np.where(present, frac, np.inf).min(axis=1)
                ) / 2
            std = np.where(count > 2, general, np.where(two, pair, 0.0))
        return np.trunc((1.0 - std) * MAX)

    def score(task: Task, idx: IntArray) -> Vector:
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
        with_pod, without_pod = both[: len(idx)], both[len(idx) :]
        # Kubernetes 1.36 scores the change in balance: 75 for no change, towards 100 for a
        # node the pod balances, towards 50 for one it unbalances (integer arithmetic).
        change: Vector = MAX // 2 + np.floor_divide(MAX // 2 + with_pod - without_pod, 2)
        return change

    return score
