"""binpack: score = Σ (used + request) / allocatable × weight over the requested, weighted
resources, divided by the sum of those weights, × 100 × binpack.weight (Volcano's
BinPackingScore); a node the task would overflow scores 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from builders import Obj, binds, node, open_session, pod, podgroup, policy, policy_text, scenario
from caldera.errors import ConfigError
from caldera.plugins.binpack import BinpackArgs

GPU = "nvidia.com/gpu"


def binpack_policy(args: Mapping[str, Any] | None = None) -> str:
    tiers = (["priority", "gang"], ["predicates", "binpack"])
    return policy_text("enqueue, allocate, backfill", *tiers, arguments={"binpack": args})


def scores(args: Mapping[str, Any] | None, **request: Any) -> list[float]:
    """Binpack scores on n1 (2 cpu, 2Gi, 1 GPU in use of 4/8Gi/4) and n2 (empty, same size)."""
    gpu = request.pop("gpu", None)
    objs: list[Obj] = [
        node("n1", cpu="4", memory="8Gi", extra={GPU: "4"}),
        node("n2", cpu="4", memory="8Gi", extra={GPU: "4"}),
        pod(
            "busy",
            cpu="2",
            memory="2Gi",
            extra={GPU: "1"},
            node_name="n1",
            scheduler="default-scheduler",
        ),
        podgroup("pg"),
        pod("p", group="pg", extra={GPU: gpu} if gpu else None, **request),
    ]
    ssn = open_session(objs, binpack_policy(args))
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    result: list[float] = ssn.node_order(task, np.arange(2, dtype=np.intp)).tolist()
    return result


@pytest.mark.parametrize(
    ("args", "request_kwargs", "expected"),
    [
        pytest.param(
            None,
            {"cpu": "1", "memory": "1Gi"},
            # n1: (3/4 + 3/8) / 2 × 100; n2: (1/4 + 1/8) / 2 × 100
            [56.25, 18.75],
            id="default weights: cpu and memory count equally",
        ),
        pytest.param(
            {"binpack.weight": 2, "binpack.cpu": 3, "binpack.memory": 1},
            {"cpu": "1", "memory": "1Gi"},
            # n1: (3·3/4 + 3/8) / 4 × 200; n2: (3·1/4 + 1/8) / 4 × 200
            [131.25, 43.75],
            id="resource weights and binpack.weight",
        ),
        pytest.param(
            {"binpack.memory": 0},
            {"cpu": "1", "memory": "1Gi"},
            [75.0, 25.0],
            id="a resource with weight 0 is left out",
        ),
        pytest.param(
            None,
            {"cpu": None, "memory": "1Gi"},
            [37.5, 12.5],
            id="only the resources the task requests count",
        ),
        pytest.param(
            {"binpack.resources": GPU, f"binpack.resources.{GPU}": 2},
            {"cpu": "1", "memory": "1Gi", "gpu": "2"},
            # n1: (3/4 + 3/8 + 2·3/4) / 4 × 100; n2: (1/4 + 1/8 + 2·2/4) / 4 × 100
            [65.625, 34.375],
            id="an extended resource listed in binpack.resources with its own weight",
        ),
        pytest.param(
            {"binpack.resources": f"example.com/foo, {GPU}"},
            {"cpu": "1", "memory": "1Gi", "gpu": "2"},
            # weight 1 unless given: n1 (3/4 + 3/8 + 3/4) / 3; n2 (1/4 + 1/8 + 2/4) / 3
            [62.5, 29.166666666666664],
            id="a listed extended resource without a weight key weighs 1",
        ),
        pytest.param(
            None,
            {"cpu": "1", "memory": "1Gi", "gpu": "2"},
            [56.25, 18.75],
            id="an extended resource not listed is ignored",
        ),
        pytest.param(
            {"binpack.resources": GPU},
            {"cpu": "1", "memory": "1Gi"},
            [56.25, 18.75],
            id="a listed extended resource the task does not request is ignored",
        ),
        pytest.param(
            {"binpack.resources": "cpu", "binpack.cpu": 3},
            {"cpu": "1", "memory": "1Gi"},
            # binpack.cpu still applies: n1 (3·3/4 + 3/8) / 4; n2 (3·1/4 + 1/8) / 4
            [65.625, 21.875],
            id="listing cpu in binpack.resources keeps binpack.cpu",
        ),
        pytest.param(
            None,
            {"cpu": "3", "memory": "1Gi"},
            # n1 would hold 5 of 4 cpu: 0; n2: (3/4 + 1/8) / 2
            [0.0, 43.75],
            id="a node the task would overflow scores 0",
        ),
        pytest.param(
            {"binpack.weight": 0}, {"cpu": "1", "memory": "1Gi"}, [0.0, 0.0], id="weight 0 is off"
        ),
    ],
)
def test_score(
    args: dict[str, Any] | None, request_kwargs: dict[str, Any], expected: list[float]
) -> None:
    assert scores(args, **request_kwargs) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("args", "weights"),
    [
        pytest.param({}, {"cpu": 1, "memory": 1}, id="defaults"),
        pytest.param(
            {"binpack.resources": f" {GPU} , example.com/foo ,", f"binpack.resources.{GPU}": 5},
            {"cpu": 1, "memory": 1, GPU: 5, "example.com/foo": 1},
            id="a comma list with spaces and an empty item",
        ),
        pytest.param(
            {f"binpack.resources.{GPU}": 5},
            {"cpu": 1, "memory": 1},
            id="a weight key for a resource not listed is ignored",
        ),
        pytest.param(
            {"binpack.resources": "memory", "binpack.resources.memory": 7, "binpack.memory": 2},
            {"cpu": 1, "memory": 2},
            id="cpu and memory weights always come from binpack.cpu and binpack.memory",
        ),
    ],
)
def test_resource_weights(args: dict[str, Any], weights: dict[str, int]) -> None:
    assert BinpackArgs.model_validate(args).weights() == weights


@pytest.mark.parametrize(
    ("args", "key"),
    [
        pytest.param({"binpack.weight": "high"}, "binpack.weight", id="a string weight"),
        pytest.param({"binpack.cpu": 1.5}, "binpack.cpu", id="a fractional cpu weight"),
        pytest.param({"binpack.memory": True}, "binpack.memory", id="a boolean memory weight"),
        pytest.param({"binpack.resources": 3}, "binpack.resources", id="a resource list number"),
        pytest.param(
            {f"binpack.resources.{GPU}": "2"},
            f"binpack.resources.{GPU}",
            id="a string extended-resource weight",
        ),
        pytest.param(
            {f"binpack.resources.{GPU}": -1},
            f"binpack.resources.{GPU}",
            id="a negative extended-resource weight",
        ),
        pytest.param({"binpack.weight": -1}, "binpack.weight", id="a negative plugin weight"),
        pytest.param({"binpack.cpuu": 1}, "binpack.cpuu", id="a misspelt key"),
    ],
)
def test_invalid_arguments_are_rejected_at_policy_load(args: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        policy(binpack_policy(args))
    assert key in str(err.value)


@pytest.mark.parametrize(
    ("policy_yaml", "expected"),
    [
        pytest.param(
            binpack_policy(),
            {"default/p0": "n1", "default/p1": "n1", "default/p2": "n2"},
            id="binpack fills the busier node first, then the next",
        ),
        pytest.param(
            None,
            {"default/p0": "n2", "default/p1": "n2", "default/p2": "n1"},
            id="the default policy (least requested) spreads instead",
        ),
    ],
)
def test_packing_end_to_end(policy_yaml: str | None, expected: dict[str, str]) -> None:
    objs: list[Obj] = [
        node("n1", cpu="4", memory="8Gi"),
        node("n2", cpu="4", memory="8Gi"),
        pod("busy", cpu="2", memory="2Gi", node_name="n1", scheduler="default-scheduler"),
        podgroup("pg"),
        *(pod(f"p{i}", group="pg", cpu="1", memory="1Gi") for i in range(3)),
    ]
    assert binds(scenario(objs, policy_yaml=policy_yaml)) == expected
