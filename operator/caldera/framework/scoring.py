"""Node scoring with a per-request cache that refreshes only the nodes that changed.

Most scorers (least/most requested, balanced resource, binpack) give a node a score that depends
only on that node's own accounting and the task's resource request. Such a scorer is registered as
``local`` (one that also reads something else of the task, such as a pod annotation, names it with
a ``variant`` function whose answer joins the cache key). For local scorers the session keeps, per
distinct request, their summed score for every node, and before each use recomputes only the rows
the node table logged as changed since. Pods of one gang or one workload share a request, so after
the first task each further task costs
O(changed rows + candidates) instead of O(nodes × scorers). Non-local scorers (those that normalise
across nodes or look at other pods) are evaluated on the candidates every time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.api.node import NodeTable
from caldera.api.resources import Vector
from caldera.api.task import Task

__all__ = ["NodeScorer", "ScoreCache"]

IntArray = npt.NDArray[np.intp]
_MAX_ENTRIES = 256
_FEW = 32
"""Candidates fewer than 1/_FEW of the nodes (one HyperNode's) are scored directly."""


@dataclass(frozen=True, slots=True)
class NodeScorer:
    fn: Callable[[Task, IntArray], Vector | float]
    """Weighted scores of the task on the given node rows; a plain number when every row gets
    the same score (nothing applies to this pod), which saves building a vector."""
    local: bool = False
    """The score of a node depends only on that node's row and the task's request (and on
    ``variant``)."""
    variant: Callable[[Task], Hashable] | None = None
    """For a local scorer: what else of the task its scores depend on (tasks with equal requests
    and equal variants share cached scores)."""


class ScoreCache:
    __slots__ = ("_all", "_entries", "_local", "_nodes", "_other", "_variants")

    def __init__(self, nodes: NodeTable, scorers: Iterable[NodeScorer]) -> None:
        self._nodes = nodes
        scorers = list(scorers)
        self._local = [s.fn for s in scorers if s.local]
        self._other = [s.fn for s in scorers if not s.local]
        self._variants = [s.variant for s in scorers if s.local and s.variant is not None]
        self._all: IntArray = np.arange(len(nodes), dtype=np.intp)
        self._entries: dict[tuple[Hashable, ...], tuple[Vector, int]] = {}

    def _local_scores(self, task: Task, rows: IntArray) -> Vector:
        total = np.zeros(len(rows), dtype=np.float64)
        for fn in self._local:
            total += fn(task, rows)
        return total

    def _cached(self, task: Task) -> Vector:
        key: tuple[Hashable, ...] = (task.resreq.tobytes(), task.nonzero_cpu, task.nonzero_memory)
        if self._variants:
            key += tuple(v(task) for v in self._variants)
        log = self._nodes.changes
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= _MAX_ENTRIES:
                del self._entries[next(iter(self._entries))]
            scores = self._local_scores(task, self._all)
        else:
            scores, seen = entry
            fresh = len(log) - seen
            if fresh > len(self._all) // 8:
                scores = self._local_scores(task, self._all)
            elif fresh:
                rows = np.fromiter(dict.fromkeys(log[seen:]), dtype=np.intp)
                scores[rows] = self._local_scores(task, rows)
        self._entries[key] = (scores, len(log))
        return scores

    def score(self, task: Task, candidates: IntArray) -> Vector:
        if self._local and len(candidates) * _FEW < len(self._all):
            total: Vector = self._local_scores(task, candidates)  # a few rows: no cache needed
        elif self._local:
            total = self._cached(task)[candidates]
        else:
            total = np.zeros(len(candidates), dtype=np.float64)
        for fn in self._other:
            total += fn(task, candidates)
        return total
