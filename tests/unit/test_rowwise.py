"""Per-node scorers give a few rows (scored row by row on plain floats) exactly the scores they
give the same rows among many (scored over numpy columns): bit for bit, on random tables with
nodes that lack a resource, nodes already over their allocatable and pods with and without
GPUs."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from builders import engine_task, node_table
from caldera.api.node import NodeTable
from caldera.api.resources import ResourceSpace, Vector
from caldera.api.task import Task
from caldera.framework.plugin import PluginOption
from caldera.framework.rowwise import FEW_ROWS
from caldera.framework.scoring import NodeScorer
from caldera.plugins.binpack import BinpackArgs, BinpackPlugin
from caldera.plugins.nodeorder.resources import (
    GPU,
    balanced_resource,
    least_requested,
    most_requested,
)

Scorer = Callable[[Task, Any], Vector]
NODES = 60
MANY = 40


def random_table(rng: np.random.Generator, space: ResourceSpace) -> NodeTable:
    size = (NODES, len(space))
    allocatable = rng.choice([0.0, 1000.0, 3000.0, 4000.0, 32000.0], size=size)
    allocatable[:, 1] = rng.choice([0.0, 2.0**30, 5 * 2.0**30, 2.0**36], size=NODES)
    table = node_table(space, [f"n{i}" for i in range(NODES)], list(allocatable))
    over = rng.choice([0.0, 0.5, 1.0, 1.3], size=size)  # 1.3: already past its allocatable
    table.used[:] = np.floor(allocatable * rng.random(size) * over)
    table.nonzero_used[:] = table.used[:, :2] + rng.choice(
        [0.0, 100.0, 200 * 2.0**20], size=(NODES, 2)
    )
    return table


def random_task(rng: np.random.Generator, space: ResourceSpace) -> Task:
    cpu = str(rng.choice(["", "0", "100m", "1500m", "4", "40"]))
    memory = str(rng.choice(["", "0", "1Mi", "1Gi", "32Gi"]))
    gpu = str(rng.choice(["", "1", "3"])) if GPU in space.index else ""
    return engine_task(space, "t", cpu=cpu or None, memory=memory or None, gpu=gpu or None)


def binpack(table: NodeTable, space: ResourceSpace) -> Scorer:
    args = BinpackArgs.model_validate(
        {
            "binpack.cpu": 2,
            "binpack.memory": 1,
            "binpack.resources": GPU,
            f"binpack.resources.{GPU}": 3,
        }
    )
    registered: list[NodeScorer] = []
    ssn = SimpleNamespace(
        nodes=table,
        space=space,
        node_order_point=SimpleNamespace(add=lambda _n, s: registered.append(s)),
    )
    BinpackPlugin(args, PluginOption("binpack", args)).on_session_open(ssn)
    fn: Scorer = registered[0].fn  # type: ignore[assignment]
    return fn


SCORERS: dict[str, Callable[[NodeTable, ResourceSpace], Scorer]] = {
    "least_requested": lambda table, _space: least_requested(table),
    "most_requested": lambda table, _space: most_requested(table),
    "balanced_resource": balanced_resource,
    "binpack": binpack,
}


@pytest.mark.parametrize("with_gpus", [False, True], ids=["cpu-memory", "with-gpus"])
@pytest.mark.parametrize("name", list(SCORERS))
def test_a_few_rows_score_as_they_do_among_many(name: str, with_gpus: bool) -> None:
    assert MANY > FEW_ROWS
    rng = np.random.default_rng(7)
    space = ResourceSpace([GPU] if with_gpus else [])
    for _ in range(40):
        table = random_table(rng, space)
        scorer = SCORERS[name](table, space)
        for _ in range(10):
            task = random_task(rng, space)
            rows = rng.permutation(NODES)[:MANY].astype(np.intp)
            among_many = scorer(task, rows)
            pieces, start = [], 0
            while start < MANY:
                size = int(rng.integers(1, FEW_ROWS + 1))
                pieces.append(scorer(task, rows[start : start + size]))
                start += size
            assert np.array_equal(np.concatenate(pieces), among_many), (name, task.resreq)
