"""A vendor's own node score (HAMi's ``ScoreNode``, added by ``OverrideScore`` to the usage
score) orders the nodes deviceshare scores, under binpack and spread: MetaX's topology loss and
score (``metax.node_score``), on nodes equal in every other way."""

from __future__ import annotations

import json

import pytest
from test_deviceshare import deviceshare_policy

from builders import REGISTRY, Obj, binds, node, pod, policy, state_of
from caldera.devices.metax import LOSS_ANNOTATION, SCORE_ANNOTATION
from caldera.simulate.runner import simulate


def metax_node(name: str, annotations: dict[str, str]) -> Obj:
    capacity = {"metax-tech.com/gpu": "4"}
    return node(
        name, cpu="32", memory="64Gi", extra=capacity, capacity=capacity, annotations=annotations
    )


@pytest.mark.parametrize(
    ("node_policy", "key", "values", "chosen"),
    [
        # binpack takes the highest total: 2000 - loss, the lower loss
        ("binpack", LOSS_ANNOTATION, {"m1": 110, "m2": 0}, "m2"),
        ("binpack", LOSS_ANNOTATION, {"m1": 0, "m2": 110}, "m1"),
        # spread takes the lowest total: 2000 - score, the higher topology score
        ("spread", SCORE_ANNOTATION, {"m1": 10, "m2": 100}, "m2"),
        ("spread", SCORE_ANNOTATION, {"m1": 100, "m2": 10}, "m1"),
    ],
    ids=[
        "binpack: the lower topology loss",
        "binpack: the lower topology loss (the other node)",
        "spread: the higher topology score",
        "spread: the higher topology score (the other node)",
    ],
)
def test_metax_topology_decides_between_otherwise_equal_nodes(
    node_policy: str, key: str, values: dict[str, int], chosen: str
) -> None:
    nodes = [metax_node(n, {key: json.dumps({"2": v})}) for n, v in values.items()]
    conf = deviceshare_policy(Vendors=["metax"], SchedulePolicy=node_policy, ScheduleWeight=100)
    sim = simulate(
        state_of([*nodes, pod("p", extra={"metax-tech.com/gpu": "2"})]),
        policy(conf, REGISTRY),
        REGISTRY,
        scheduler_names=["volcano"],
    )
    assert binds(sim) == {"default/p": chosen}
