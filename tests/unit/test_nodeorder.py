"""nodeorder: kube-scheduler's resource scorers with their integer arithmetic, and their weights.

Expected scores are computed by hand with kube-scheduler's formulas (cpu in millicores, memory in
bytes, all integer):

- LeastAllocated, per resource ``((capacity − requested) · 100) // capacity`` (0 when requested
  exceeds capacity), averaged with integer division (Volcano gives cpu and memory weight 50 each);
- MostAllocated, per resource ``(min(requested, capacity) · 100) // capacity``, averaged likewise;
- both use *non-zero* requests: a container without a cpu/memory request counts 100m/200Mi, on
  the node (already placed pods) and for the pod itself;
- BalancedAllocation uses actual requests; fractions requested/capacity capped at 1; two
  resources give std = |a − b| / 2, more give the population standard deviation; the score is
  ``trunc((1 − std) · 100)``;
- a resource the node does not have (capacity 0) is left out for that node, and so is an
  extended resource (nvidia.com/gpu) the pod does not request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pytest

from builders import (
    Obj,
    binds,
    engine_task,
    node,
    node_table,
    open_session,
    pod,
    podgroup,
    policy,
    policy_text,
    scenario,
)
from caldera.api.node import NodeTable
from caldera.api.resources import PODS, ResourceSpace
from caldera.api.task import TaskStatus
from caldera.plugins.nodeorder.resources import (
    GPU,
    Scorer,
    balanced_resource,
    least_requested,
    most_requested,
)
from caldera.quantity import to_engine_units

Gi = 2**30
Mi = 2**20


def one_node(
    space: ResourceSpace,
    allocatable: Mapping[str, str],
    placed: Iterable[Mapping[str, str | None]] = (),
) -> NodeTable:
    """A one-node table with ``placed`` pods (cpu/memory/gpu requests) running on it."""
    alloc = space.vector({k: to_engine_units(k, v) for k, v in allocatable.items()})
    alloc[space.index[PODS]] = 110
    table = node_table(space, ["n"], [alloc])
    for i, req in enumerate(placed):
        table.add_task(0, engine_task(space, f"placed-{i}", status=TaskStatus.RUNNING, **req))
    return table


SPACE = ResourceSpace()
GPU_SPACE = ResourceSpace([GPU])
ROW = np.array([0], dtype=np.intp)


def least(table: NodeTable, space: ResourceSpace) -> Scorer:
    return least_requested(table)


def most(table: NodeTable, space: ResourceSpace) -> Scorer:
    return most_requested(table)


@pytest.mark.parametrize(
    ("scorer", "space", "allocatable", "placed", "asked", "expected"),
    [
        pytest.param(
            least,
            SPACE,
            {"cpu": "4", "memory": "8Gi"},
            [{"cpu": "1", "memory": "2Gi"}],
            {"cpu": "1", "memory": "1Gi"},
            # cpu (4000−2000)·100//4000 = 50; memory (8−3)·100//8 = 62; (50+62)//2
            56,
            id="least: per-resource integer scores averaged with integer division",
        ),
        pytest.param(
            least,
            SPACE,
            {"cpu": "3", "memory": "5Gi"},
            [],
            {"cpu": "1", "memory": "1Gi"},
            # cpu 2000·100//3000 = 66; memory 4·100//5 = 80; 146//2
            73,
            id="least: integer division at each step",
        ),
        pytest.param(
            least,
            SPACE,
            {"cpu": "3", "memory": "7Gi"},
            [{"cpu": "1", "memory": "1Gi"}],
            {"cpu": "500m", "memory": "1Gi"},
            # cpu 1500·100//3000 = 50; memory 5·100//7 = 71; 121//2
            60,
            id="least: odd sums round down",
        ),
        pytest.param(
            least,
            SPACE,
            {"cpu": "1", "memory": "1000Mi"},
            [],
            {},
            # the pod counts 100m and 200Mi: 900·100//1000 = 90, 800·100//1000 = 80
            85,
            id="least: a pod without requests counts 100m and 200Mi",
        ),
        pytest.param(
            least,
            SPACE,
            {"cpu": "1", "memory": "1000Mi"},
            [{}],
            {"cpu": "100m", "memory": "200Mi"},
            # the placed pod also counts 100m/200Mi: 800·100//1000, 600·100//1000
            70,
            id="least: placed pods without requests count the defaults too",
        ),
        pytest.param(
            least,
            SPACE,
            {"cpu": "1", "memory": "8Gi"},
            [{"cpu": "500m"}],
            {"cpu": "1", "memory": "4Gi"},
            # cpu 1500 > 1000 scores 0; the placed pod counts 200Mi of memory:
            # (8Gi − 4Gi − 200Mi)·100 // 8Gi = 47; (0+47)//2
            23,
            id="least: a request above capacity scores 0 for that resource",
        ),
        pytest.param(
            least,
            SPACE,
            {"cpu": "4", "memory": "0"},
            [],
            {"cpu": "1", "memory": "1Gi"},
            # only cpu: 3000·100//4000
            75,
            id="least: a node without memory is scored on cpu alone",
        ),
        pytest.param(
            most,
            SPACE,
            {"cpu": "4", "memory": "8Gi"},
            [{"cpu": "1", "memory": "2Gi"}],
            {"cpu": "1", "memory": "1Gi"},
            # cpu 2000·100//4000 = 50; memory 3·100//8 = 37; 87//2
            43,
            id="most: per-resource integer scores averaged with integer division",
        ),
        pytest.param(
            most,
            SPACE,
            {"cpu": "3", "memory": "7Gi"},
            [{"cpu": "1", "memory": "1Gi"}],
            {"cpu": "500m", "memory": "1Gi"},
            # cpu 1500·100//3000 = 50; memory 2·100//7 = 28; 78//2
            39,
            id="most: integer division at each step",
        ),
        pytest.param(
            most,
            SPACE,
            {"cpu": "1", "memory": "1000Mi"},
            [{"cpu": "1", "memory": "900Mi"}],
            {},
            # non-zero defaults push both past capacity: capped at 100 each
            100,
            id="most: requested is capped at capacity",
        ),
        pytest.param(
            most,
            SPACE,
            {"cpu": "4", "memory": "0"},
            [],
            {"cpu": "1", "memory": "1Gi"},
            25,
            id="most: a node without memory is scored on cpu alone",
        ),
        pytest.param(
            balanced_resource,
            SPACE,
            {"cpu": "4", "memory": "8Gi"},
            [{"cpu": "1", "memory": "2Gi"}],
            {"cpu": "1", "memory": "1Gi"},
            # with the pod 0.5 and 0.375: std 0.0625, balance 93 (truncated); without it
            # 0.25 and 0.25: balance 100; 50 + (50 + 93 − 100) // 2
            71,
            id="balanced: two resources, std = |a − b| / 2, truncated",
        ),
        pytest.param(
            balanced_resource,
            SPACE,
            {"cpu": "4", "memory": "8Gi"},
            [],
            {},
            # balance 100 with and without the pod: no change scores 75
            75,
            id="balanced: actual requests, so a pod without requests changes nothing (75)",
        ),
        pytest.param(
            balanced_resource,
            SPACE,
            {"cpu": "4", "memory": "8Gi"},
            [{"cpu": "4", "memory": "1Gi"}],
            {"cpu": "1", "memory": "1Gi"},
            # with: cpu 5/4 capped at 1, memory 0.25: std 0.375, balance 62; without: 1 and
            # 0.125: std 0.4375, balance 56; 50 + (50 + 62 − 56) // 2
            78,
            id="balanced: fractions are capped at 1",
        ),
        pytest.param(
            balanced_resource,
            SPACE,
            {"cpu": "4", "memory": "0"},
            [],
            {"cpu": "3", "memory": "1Gi"},
            75,
            id="balanced: a node without memory leaves one fraction, std 0 either way",
        ),
        pytest.param(
            balanced_resource,
            GPU_SPACE,
            {"cpu": "4", "memory": "10Gi"},
            [],
            {"cpu": "2", "memory": "3Gi"},
            # 0.5 and 0.3 (the node has no GPU): std |0.5 − 0.3| / 2 = 0.1 → 90, where
            # ((0.5 + 0.3) − 2·0.3) / 2 would round to 89.999…; without the pod 100:
            # 50 + (50 + 90 − 100) // 2
            70,
            id="balanced: two fractions left of three use kube's exact |a − b| / 2",
        ),
        pytest.param(
            balanced_resource,
            GPU_SPACE,
            {"cpu": "4", "memory": "8Gi", GPU: "4"},
            [],
            {"cpu": "1", "memory": "4Gi", "gpu": "3"},
            # 0.25, 0.5, 0.75: mean 0.5, std sqrt(0.125/3) = 0.2041, balance 79; without
            # the pod 100: 50 + 29 // 2
            64,
            id="balanced: with a GPU request, the standard deviation of three fractions",
        ),
        pytest.param(
            balanced_resource,
            GPU_SPACE,
            {"cpu": "4", "memory": "8Gi", GPU: "4"},
            [{"gpu": "2"}],
            {"cpu": "1", "memory": "4Gi"},
            # the GPU is skipped as the pod does not ask for one: 0.25, 0.5 → 87; without
            # the pod 100: 50 + 37 // 2
            68,
            id="balanced: a GPU the pod does not request is left out",
        ),
        pytest.param(
            balanced_resource,
            GPU_SPACE,
            {"cpu": "4", "memory": "8Gi"},
            [],
            {"cpu": "1", "memory": "4Gi"},
            68,
            id="balanced: a node without GPUs scores on cpu and memory",
        ),
        pytest.param(
            balanced_resource,
            SPACE,
            {"cpu": "4", "memory": "8Gi"},
            [{"cpu": "2", "memory": "0"}],
            {"cpu": "0", "memory": "4Gi"},
            # without: 0.5 and 0, balance 75; with: 0.5 and 0.5, balance 100; the pod
            # balances the node: 50 + (50 + 100 − 75) // 2
            87,
            id="balanced (1.36): a pod that evens the node out scores above 75",
        ),
    ],
)
def test_each_scorer_scores_one_node_with_kube_schedulers_integer_arithmetic(
    scorer: Callable[[NodeTable, ResourceSpace], Scorer],
    space: ResourceSpace,
    allocatable: dict[str, str],
    placed: list[dict[str, str]],
    asked: dict[str, str],
    expected: int,
) -> None:
    table = one_node(space, allocatable, placed)
    task = engine_task(
        space, "t", cpu=asked.get("cpu"), memory=asked.get("memory"), gpu=asked.get("gpu")
    )
    assert scorer(table, space)(task, ROW).tolist() == [expected]


def test_scorers_are_vectorised_over_the_candidate_rows() -> None:
    alloc = [SPACE.vector({"cpu": 4000, "memory": 8 * Gi, "pods": 110})] * 3
    table = node_table(SPACE, ["a", "b", "c"], alloc)
    table.add_task(1, engine_task(SPACE, "busy", cpu="2", memory="2Gi", status=TaskStatus.RUNNING))
    task = engine_task(SPACE, "t", cpu="1", memory="1Gi")
    rows = np.array([2, 1], dtype=np.intp)
    # c is empty (like n1 below), b holds 2 cpu / 2Gi (like n2 below)
    assert least_requested(table)(task, rows).tolist() == [81, 43]
    assert most_requested(table)(task, rows).tolist() == [18, 56]
    # c: balance 93 with the pod, 100 without; b: 81 with, 87 without
    assert balanced_resource(table, SPACE)(task, rows).tolist() == [71, 72]


# -- the plugin: weights ---------------------------------------------------------------------


def nodeorder_policy(args: Mapping[str, Any] | None = None) -> str:
    tiers = (["gang", "predicates", "nodeorder"],)
    return policy_text("enqueue, allocate, backfill", *tiers, arguments={"nodeorder": args})


# n1 empty, n2 holding 2 cpu / 2Gi, both 4 cpu / 8Gi; the pod asks 1 cpu / 1Gi.
#           least                      most                    balanced
# n1   (75 + 87)//2 = 81         (25 + 12)//2 = 18     93 with the pod, 100 without → 71
# n2   (25 + 62)//2 = 43         (75 + 37)//2 = 56     81 with the pod, 87 without → 72
# Neither node has a taint: taint toleration gives both its full 100 × weight 3.
T = 300
WEIGHT_OBJECTS: list[Obj] = [
    node("n1", cpu="4", memory="8Gi"),
    node("n2", cpu="4", memory="8Gi"),
    pod("busy", cpu="2", memory="2Gi", node_name="n2", scheduler="default-scheduler"),
    podgroup("pg"),
    pod("p", group="pg", cpu="1", memory="1Gi"),
]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(None, [81 + 71 + T, 43 + 72 + T], id="defaults: least 1, most 0, balanced 1"),
        pytest.param(
            {"leastrequested.weight": 2, "balancedresource.weight": 0},
            [162 + T, 86 + T],
            id="leastrequested.weight multiplies its score",
        ),
        pytest.param(
            {"leastrequested.weight": 0, "mostrequested.weight": 1, "balancedresource.weight": 0},
            [18 + T, 56 + T],
            id="mostrequested.weight turns packing on",
        ),
        pytest.param(
            {"mostrequested.weight": 1},
            [81 + 18 + 71 + T, 43 + 56 + 72 + T],
            id="weighted scores add up",
        ),
        pytest.param(
            {"leastrequested.weight": 0, "balancedresource.weight": 3},
            [213 + T, 216 + T],
            id="balancedresource.weight multiplies its score",
        ),
        pytest.param(
            {"leastrequested.weight": 0, "balancedresource.weight": 0},
            [T, T],
            id="weight 0 turns a scorer off",
        ),
    ],
)
def test_weights(args: dict[str, int] | None, expected: list[int]) -> None:
    ssn = open_session(WEIGHT_OBJECTS, nodeorder_policy(args))
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    scores = ssn.node_order(task, np.arange(len(ssn.nodes), dtype=np.intp))
    assert scores.tolist() == expected


@pytest.mark.parametrize(
    ("args", "node_name"),
    [
        pytest.param(None, "n1", id="least requested spreads onto the empty node"),
        pytest.param(
            {"leastrequested.weight": 0, "mostrequested.weight": 1, "balancedresource.weight": 0},
            "n2",
            id="most requested packs onto the busy node",
        ),
    ],
)
def test_weights_decide_placement(args: dict[str, int] | None, node_name: str) -> None:
    sim = scenario(WEIGHT_OBJECTS, policy_yaml=nodeorder_policy(args))
    assert binds(sim) == {"default/p": node_name}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1", id="a string"),
        pytest.param(1.5, id="a float"),
        pytest.param(-1, id="a negative weight"),
    ],
)
def test_invalid_weights_are_rejected_at_policy_load(value: object) -> None:
    from caldera.errors import ConfigError

    with pytest.raises(ConfigError, match=r"leastrequested\.weight"):
        policy(nodeorder_policy({"leastrequested.weight": value}))


# -- ties ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(["zeta", "alpha", "mid"], id="listed out of order"),
        pytest.param(["alpha", "mid", "zeta"], id="listed in order"),
    ],
)
def test_equal_scores_go_to_the_node_whose_name_sorts_first(names: list[str]) -> None:
    """Documented rule: the best total score wins; among equal scores the node that sorts first
    by name wins (Volcano picks one of them at random; Caldera is reproducible)."""
    objs: list[Obj] = [node(n) for n in names]
    sim = scenario([*objs, podgroup("pg"), pod("p", group="pg")])
    assert binds(sim) == {"default/p": "alpha"}


def test_a_better_score_beats_name_order() -> None:
    sim = scenario(
        [
            node("alpha"),
            node("beta"),
            pod("busy", node_name="alpha", scheduler="default-scheduler"),
            podgroup("pg"),
            pod("p", group="pg"),
        ]
    )
    assert binds(sim) == {"default/p": "beta"}
