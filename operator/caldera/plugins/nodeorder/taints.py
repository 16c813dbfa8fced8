"""TaintToleration score: fewer untolerated ``PreferNoSchedule`` taints score higher.

kube-scheduler counts, per node, the PreferNoSchedule taints that none of the pod's tolerations
with effect PreferNoSchedule (or no effect) tolerates, then normalises over the candidate nodes
in reverse: ``100 − 100 × count // max count`` (all 100 when no candidate has such a taint).

Nodes are grouped by their taint list once per session and the counts cached per distinct
toleration list. Complexity per task: a dictionary lookup plus O(C) numpy for C candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from caldera.api.node import NodeTable
from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.interfaces import IntArray
from caldera.models.core import Taint, Toleration

__all__ = ["normalize", "taint_toleration"]

MAX = 100


def normalize(counts: Vector, *, reverse: bool) -> Vector:
    """kube's DefaultNormalizeScore over the candidates (integer arithmetic)."""
    top = counts.max() if len(counts) else 0.0
    if top == 0:
        return np.full(len(counts), float(MAX) if reverse else 0.0)
    scores: Vector = np.floor_divide(MAX * counts, top)
    return MAX - scores if reverse else scores


def _preferred_groups(
    node_taints: Sequence[tuple[Taint, ...]],
) -> list[tuple[tuple[Taint, ...], IntArray]]:
    """The nodes with PreferNoSchedule taints, grouped by identical lists of them."""
    groups: dict[tuple[Taint, ...], list[int]] = {}
    for row, taints in enumerate(node_taints):
        preferred = tuple(t for t in taints if t.effect == "PreferNoSchedule")
        if preferred:
            groups.setdefault(preferred, []).append(row)
    out = [(taints, np.array(rows, dtype=np.intp)) for taints, rows in groups.items()]
    for _, rows in out:
        rows.flags.writeable = False
    return out


def taint_toleration(table: NodeTable) -> Callable[[Task, IntArray], Vector | float]:
    index = table.derived("preferred taint groups", lambda: _preferred_groups(table.taints))
    zeros = np.zeros(len(table), dtype=np.float64)
    cache: dict[tuple[Toleration, ...], Vector] = {}

    def counts(tolerations: tuple[Toleration, ...]) -> Vector:
        usable = [t for t in tolerations if t.effect in ("", "PreferNoSchedule")]
        out = zeros.copy()
        for taints, rows in index:
            out[rows] = sum(1 for taint in taints if not any(t.tolerates(taint) for t in usable))
        return out

    def score(task: Task, idx: IntArray) -> Vector | float:
        if not index:
            return float(MAX)  # no PreferNoSchedule taint anywhere: every count is 0
        tolerations = task.spec.tolerations
        hit = cache.get(tolerations)
        if hit is None:
            hit = cache[tolerations] = counts(tolerations)
        return normalize(hit[idx], reverse=True)

    return score
