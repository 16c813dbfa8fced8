"""ScoreCache: per-request cached sums of local scorers, refreshed by the rows that changed.

The property checked everywhere: whatever happened to the node table, the cache answers exactly
what scoring from scratch answers.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from builders import engine_task, node_table
from caldera.api.node import NodeTable
from caldera.api.resources import ResourceSpace, Vector
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import IntArray
from caldera.framework.scoring import NodeScorer, ScoreCache
from caldera.plugins.nodeorder.resources import (
    GPU,
    balanced_resource,
    least_requested,
    most_requested,
)

SPACE = ResourceSpace([GPU])
CPU, MEM, GPU_COL = SPACE.index["cpu"], SPACE.index["memory"], SPACE.index[GPU]


def make_table(rng: random.Random, n: int) -> NodeTable:
    rows = [
        SPACE.vector(
            {
                "cpu": rng.choice([2000, 4000, 8000, 16000]),
                "memory": rng.choice([4, 8, 16, 64]) * 2**30,
                "pods": 110,
                GPU: rng.choice([0, 0, 4, 8]),
            }
        )
        for _ in range(n)
    ]
    return node_table(SPACE, [f"n{i:03}" for i in range(n)], rows)


def binpack_like(table: NodeTable) -> NodeScorer:
    def score(task: Task, idx: IntArray) -> Vector:
        out: Vector = np.zeros(len(idx))
        for col in (CPU, MEM):
            alloc = table.allocatable[idx, col]
            out += (table.used[idx, col] + task.resreq[col]) / alloc
        return out * 50

    return NodeScorer(score, local=True)


def local_scorers(table: NodeTable) -> list[NodeScorer]:
    least, most = least_requested(table), most_requested(table)
    balanced = balanced_resource(table, SPACE)
    return [
        NodeScorer(lambda t, i: least(t, i) + 2 * balanced(t, i), local=True),
        NodeScorer(most, local=True),
        binpack_like(table),
    ]


def fresh(scorers: list[NodeScorer], task: Task, candidates: IntArray) -> Vector:
    total: Vector = np.zeros(len(candidates))
    for s in scorers:
        total += s.fn(task, candidates)
    return total


SHAPES = [
    ("1", "1Gi", None),
    ("500m", "3Gi", None),
    ("2", None, None),
    (None, None, None),
    ("0", "1Gi", None),  # same request vector as (None, "1Gi") but non-zero cpu 0, not 100m
    (None, "1Gi", None),
    ("1", "2Gi", "1"),
]


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed {s}") for s in range(8)])
def test_cached_scores_equal_a_fresh_computation_after_any_allocations(seed: int) -> None:
    rng = random.Random(seed)
    n = 40
    table = make_table(rng, n)
    scorers = local_scorers(table)
    cache = ScoreCache(table, scorers)
    probes = [engine_task(SPACE, f"probe{i}", *shape) for i, shape in enumerate(SHAPES)]
    placed: list[tuple[int, Task]] = []
    counter = 0
    for _step in range(60):
        # a burst of changes: one (partial refresh) or many (more than n/8: full recompute)
        for _ in range(rng.choice([0, 1, 1, 2, 3, 12])):
            if placed and rng.random() < 0.4:
                row, task = placed.pop(rng.randrange(len(placed)))
                table.remove_task(row, task)
            else:
                counter += 1
                cpu, mem, gpu = rng.choice(SHAPES)
                task = engine_task(SPACE, f"t{counter}", cpu, mem, gpu, status=TaskStatus.RUNNING)
                row = rng.randrange(n)
                table.add_task(row, task)
                placed.append((row, task))
        for probe in rng.sample(probes, 3):
            candidates = np.array(sorted(rng.sample(range(n), rng.randint(1, n))), dtype=np.intp)
            got = cache.score(probe, candidates)
            np.testing.assert_array_equal(got, fresh(scorers, probe, candidates))


def test_requests_with_equal_vectors_but_different_scoring_defaults_get_separate_entries() -> None:
    table = make_table(random.Random(1), 5)
    scorers = local_scorers(table)
    cache = ScoreCache(table, scorers)
    explicit_zero = engine_task(SPACE, "zero", "0", "1Gi")
    unset = engine_task(SPACE, "unset", None, "1Gi")
    assert np.array_equal(explicit_zero.resreq, unset.resreq)
    rows = np.arange(5, dtype=np.intp)
    a = cache.score(explicit_zero, rows)
    b = cache.score(unset, rows)
    np.testing.assert_array_equal(a, fresh(scorers, explicit_zero, rows))
    np.testing.assert_array_equal(b, fresh(scorers, unset, rows))
    assert not np.array_equal(a, b)  # least requested counts 100m for the unset cpu


def test_a_local_scorers_variant_joins_the_cache_key() -> None:
    table = make_table(random.Random(2), 5)
    by_label = NodeScorer(
        lambda t, i: np.full(len(i), float(len(t.annotations.get("mode", "")))),
        local=True,
        variant=lambda t: t.annotations.get("mode"),
    )
    cache = ScoreCache(table, [by_label])
    plain, marked = (
        engine_task(SPACE, "plain", "1", "1Gi"),
        engine_task(SPACE, "marked", "1", "1Gi"),
    )
    marked.annotations["mode"] = "pack"
    rows = np.arange(5, dtype=np.intp)
    assert cache.score(plain, rows).tolist() == [0.0] * 5
    assert cache.score(marked, rows).tolist() == [4.0] * 5
    assert cache.score(plain, rows).tolist() == [0.0] * 5


def test_different_requests_get_separate_entries() -> None:
    table = make_table(random.Random(2), 6)
    scorers = local_scorers(table)
    cache = ScoreCache(table, scorers)
    rows = np.arange(6, dtype=np.intp)
    small, big = engine_task(SPACE, "s", "100m", "100Mi"), engine_task(SPACE, "b", "2", "4Gi")
    for task in (small, big, small, big):
        np.testing.assert_array_equal(cache.score(task, rows), fresh(scorers, task, rows))


class Counting:
    """A scorer that records which rows it was asked about."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def __call__(self, task: Task, idx: IntArray) -> Vector:
        self.calls.append(idx.tolist())
        return np.asarray(idx, dtype=np.float64) * 10 + len(self.calls)


def test_local_scores_are_computed_once_and_refreshed_only_on_changed_rows() -> None:
    table = make_table(random.Random(3), 16)
    local = Counting()
    cache = ScoreCache(table, [NodeScorer(local, local=True)])
    task = engine_task(SPACE, "t", "1", "1Gi")
    rows = np.array([1, 5], dtype=np.intp)
    assert cache.score(task, rows).tolist() == [11.0, 51.0]
    assert local.calls == [list(range(16))]
    cache.score(task, np.array([2], dtype=np.intp))
    assert len(local.calls) == 1  # nothing changed: no scorer call
    table.add_task(5, engine_task(SPACE, "x", "1", "1Gi", status=TaskStatus.RUNNING))
    assert cache.score(task, rows).tolist() == [11.0, 52.0]
    assert local.calls[1:] == [[5]]
    for row in (1, 2, 3):  # 3 changes of 16 rows: more than 16/8, so all rows again
        table.add_task(row, engine_task(SPACE, f"y{row}", "1", "1Gi", status=TaskStatus.RUNNING))
    cache.score(task, rows)
    assert local.calls[2:] == [list(range(16))]


def test_non_local_scorers_are_evaluated_on_every_call() -> None:
    table = make_table(random.Random(4), 8)
    local, other = Counting(), Counting()
    cache = ScoreCache(table, [NodeScorer(local, local=True), NodeScorer(other)])
    task = engine_task(SPACE, "t", "1", "1Gi")
    rows = np.array([0, 3], dtype=np.intp)
    first = cache.score(task, rows)
    second = cache.score(task, rows)
    # local: rows·10 + 1 (cached); other: rows·10 + its call count
    assert first.tolist() == [0 + 1 + 0 + 1, 30 + 1 + 30 + 1]
    assert second.tolist() == [0 + 1 + 0 + 2, 30 + 1 + 30 + 2]
    assert other.calls == [[0, 3], [0, 3]]  # only the candidates, each time
    assert len(local.calls) == 1


def test_only_non_local_scorers() -> None:
    table = make_table(random.Random(5), 4)
    other = Counting()
    cache = ScoreCache(table, [NodeScorer(other)])
    rows = np.array([2], dtype=np.intp)
    assert cache.score(engine_task(SPACE, "t", "1", "1Gi"), rows).tolist() == [21.0]


def test_no_scorers_score_zero() -> None:
    table = make_table(random.Random(6), 3)
    cache = ScoreCache(table, [])
    rows = np.arange(3, dtype=np.intp)
    assert cache.score(engine_task(SPACE, "t", "1", "1Gi"), rows).tolist() == [0.0, 0.0, 0.0]


def test_many_distinct_requests_stay_correct_past_the_entry_limit() -> None:
    table = make_table(random.Random(7), 10)
    scorers = local_scorers(table)
    cache = ScoreCache(table, scorers)
    rows = np.arange(10, dtype=np.intp)
    tasks = [engine_task(SPACE, f"t{i}", f"{i + 1}m", "1Gi") for i in range(300)]
    for i, task in enumerate(tasks):
        if i % 50 == 0:
            table.add_task(
                i % 10, engine_task(SPACE, f"x{i}", "1", "1Gi", status=TaskStatus.RUNNING)
            )
        np.testing.assert_array_equal(cache.score(task, rows), fresh(scorers, task, rows))
    for task in tasks[:5]:  # evicted long ago: recomputed, still right
        np.testing.assert_array_equal(cache.score(task, rows), fresh(scorers, task, rows))
