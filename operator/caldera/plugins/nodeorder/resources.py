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
the session's score cache, so after a workload's first pod only the rows that changed are scored,
and those few row by row on plain floats (:mod:`caldera.framework.rowwise`: the same formulas).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from caldera.api.node import Matrix, NodeTable
from caldera.api.resources import CPU, CPU_MEMORY, MEMORY, ResourceSpace, Vector
from caldera.api.task import Task
from caldera.framework.interfaces import IntArray
from caldera.framework.rowwise import COLUMNS, Math, Num, evaluate

__all__ = ["balanced_resource", "least_requested", "most_requested"]

MAX = 100.0
GPU = "nvidia.com/gpu"
Scorer = Callable[[Task, IntArray], Vector]


class _CpuMemory:
    """Per node, what the cpu/memory scorers read of its allocatable, computed once per session
    (allocatable does not change within one), as one matrix so a row is read in one go:
    allocatable cpu and memory, the same with 1 where there is none (a node without the resource
    scores 0 on it by the formulas themselves, so no mask is needed), how many of the two it has
    (at least 1: the mean's divisor) and whether it has both (1.0 or 0.0)."""

    __slots__ = ("facts",)

    def __init__(self, table: NodeTable) -> None:
        self.facts: Matrix = table.derived("cpu/memory facts", lambda: _cpu_memory_facts(table))


def _cpu_memory_facts(table: NodeTable) -> Matrix:
    """:attr:`_CpuMemory.facts`, worked out once per node set (read only)."""
    alloc = table.allocatable[:, CPU_MEMORY]
    present = alloc > 0
    facts: Matrix = np.column_stack(
        (
            alloc,
            np.where(present, alloc, 1.0),
            np.maximum(present.sum(axis=1), 1),
            np.all(present, axis=1),
        )
    ).astype(np.float64)
    facts.flags.writeable = False
    return facts


def _least(m: Math, add_c: Num, add_m: Num, *v: Num) -> Num:
    """LeastAllocated: the node's non-zero requests (``v``: cpu, memory, then the node's facts)
    plus the pod's ``add_c``/``add_m``."""
    req_c, req_m, alloc_c, alloc_m, div_c, div_m, count, _ = v
    req_c, req_m = req_c + add_c, req_m + add_m
    s_c = m.where(req_c > alloc_c, 0.0, m.floordiv((alloc_c - req_c) * MAX, div_c))
    s_m = m.where(req_m > alloc_m, 0.0, m.floordiv((alloc_m - req_m) * MAX, div_m))
    return m.floordiv(s_c + s_m, count)


def _most(m: Math, add_c: Num, add_m: Num, *v: Num) -> Num:
    """MostAllocated, read as :func:`_least` is."""
    req_c, req_m, alloc_c, alloc_m, div_c, div_m, count, _ = v
    req_c, req_m = req_c + add_c, req_m + add_m
    s_c = m.floordiv(m.minimum(req_c, alloc_c) * MAX, div_c)
    s_m = m.floordiv(m.minimum(req_m, alloc_m) * MAX, div_m)
    return m.floordiv(s_c + s_m, count)


def _balance_change(m: Math, add_c: Num, add_m: Num, *v: Num) -> Num:
    """BalancedAllocation over cpu and memory: the node's used cpu and memory (``v``, then the
    node's facts) with and without the pod's ``add_c``/``add_m``. The std of two fractions is
    |a − b| / 2 on a node that has both, 0 on one that lacks either."""
    used_c, used_m, _, _, div_c, div_m, _, both = v
    with_c = m.minimum((used_c + add_c) / div_c, 1.0)
    with_m = m.minimum((used_m + add_m) / div_m, 1.0)
    without_c, without_m = m.minimum(used_c / div_c, 1.0), m.minimum(used_m / div_m, 1.0)
    with_pod = m.trunc((1.0 - m.where(both, m.abs(with_c - with_m) / 2, 0.0)) * MAX)
    without_pod = m.trunc((1.0 - m.where(both, m.abs(without_c - without_m) / 2, 0.0)) * MAX)
    return _change(m, with_pod, without_pod)


def _over_nonzero_requests(table: NodeTable, formula: Callable[..., Num]) -> Scorer:
    """A scorer running ``formula`` (:func:`_least` or :func:`_most`) on the candidate rows."""
    node = _CpuMemory(table)

    def score(task: Task, idx: IntArray) -> Vector:
        add = (task.nonzero_cpu, task.nonzero_memory)
        return evaluate(formula, idx, table.nonzero_used, node.facts, args=add)

    return score


def least_requested(table: NodeTable) -> Scorer:
    return _over_nonzero_requests(table, _least)


def most_requested(table: NodeTable) -> Scorer:
    return _over_nonzero_requests(table, _most)


def _change(m: Math, with_pod: Num, without_pod: Num) -> Num:
    """Kubernetes 1.36 scores the change in balance: 75 for no change, towards 100 for a node
    the pod balances, towards 50 for one it unbalances (integer arithmetic)."""
    return MAX // 2 + m.floordiv(MAX // 2 + with_pod - without_pod, 2)


def balanced_resource(table: NodeTable, space: ResourceSpace) -> Scorer:
    names = [r for r in (CPU, MEMORY, GPU) if r in space.index]
    cols = np.array([space.index[r] for r in names], dtype=np.intp)
    extended = np.array([r not in (CPU, MEMORY) for r in names], dtype=bool)
    gpu, cpu, memory = space.index.get(GPU), space.index[CPU], space.index[MEMORY]
    node = _CpuMemory(table)
    used_cpu_memory = table.used[:, CPU_MEMORY]  # a view: always the current use

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
        change: Vector = _change(COLUMNS, both[: len(idx)], both[len(idx) :])
        return change

    # kube counts the GPU only where a node advertises it: with none advertising it (a shared
    # device's count the device plugin does not publish), cpu and memory decide alone
    advertised = gpu is not None and bool((table.allocatable[:, gpu] > 0).any())

    def score(task: Task, idx: IntArray) -> Vector:
        if advertised and task.resreq[gpu] != 0:
            return with_gpu(task, idx)
        add = (float(task.resreq[cpu]), float(task.resreq[memory]))
        return evaluate(_balance_change, idx, used_cpu_memory, node.facts, args=add)

    return score
