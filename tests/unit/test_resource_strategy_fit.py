"""resource-strategy-fit: Volcano's per-resource LeastAllocated/MostAllocated scores (× 100 ×
resourceStrategyFitWeight), the pod annotations that override them, SRA and the proportional
predicate. The score tables are Volcano's own (resource_strategy_fit_test.go, sra_test.go,
proportional_test.go), rebuilt from pods and nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pytest

from builders import Obj, node, open_session, pod, podgroup, policy, policy_text, task_named
from caldera.errors import ConfigError
from caldera.framework.session import Session
from caldera.plugins.resource_strategy_fit import (
    SCORING_TYPE_ANNOTATION,
    WEIGHT_ANNOTATION,
    ResourceStrategyFitArgs,
    Strategy,
    resolve,
)

RSF = "resource-strategy-fit"
GPU = "nvidia.com/gpu"
FOO = "example.com/foo"
T4 = "nvidia.com/t4"
A10 = "nvidia.com/a10"
LA: Literal["LeastAllocated"] = "LeastAllocated"
MA: Literal["MostAllocated"] = "MostAllocated"


def rsf_policy(args: Mapping[str, Any] | None = None, *, predicates: bool = False) -> str:
    tier = ["predicates", RSF] if predicates else [RSF]
    return policy_text("enqueue, allocate", ["gang"], tier, arguments={RSF: args})


def strategies(entries: Mapping[str, tuple[str, int]]) -> dict[str, dict[str, Any]]:
    """``resources`` from ``{name: (type, weight)}``."""
    return {name: {"type": t, "weight": w} for name, (t, w) in entries.items()}


def score_table(ssn: Session, names: Sequence[str]) -> dict[str, dict[str, float]]:
    """Each named pending pod's scores, by node name."""
    rows = np.arange(len(ssn.nodes), dtype=np.intp)
    return {
        n: dict(
            zip(ssn.nodes.names, ssn.node_order(task_named(ssn, n), rows).tolist(), strict=True)
        )
        for n in names
    }


def by_node(*scores: float) -> dict[str, Any]:
    """Expected scores on n1, n2, …"""
    return {f"n{i}": pytest.approx(v) for i, v in enumerate(scores, start=1)}


# -- arguments ---------------------------------------------------------------------------------


def test_default_arguments_score_cpu_and_memory_least_allocated_with_weight_ten() -> None:
    args = ResourceStrategyFitArgs.model_validate({})
    assert args.weight == 10
    assert dict(args.table()) == {"cpu": Strategy(), "memory": Strategy()}
    assert (Strategy().type, Strategy().weight) == (LA, 1)
    assert not args.sra.enable and not args.proportional.enable


def test_a_resources_table_replaces_the_default_one_and_fills_in_type_and_weight() -> None:
    args = ResourceStrategyFitArgs.model_validate(
        {"resources": {"cpu": {"type": MA}, "memory": {"weight": 2}}}
    )
    assert args.table() == {"cpu": Strategy(type=MA), "memory": Strategy(weight=2)}


def test_sra_and_proportional_arguments_as_volcano_reads_them() -> None:
    args = ResourceStrategyFitArgs.model_validate(
        {
            "sra": {
                "enable": True,
                "resources": f"{T4}, {A10}",
                "weight": 3,
                "resourceWeight": {A10: 2},
            },
            "proportional": {
                "enable": True,
                "resources": f"{T4}, {A10}",
                "resourceProportion": {f"{T4}.cpu": 3, f"{T4}.memory": 6, f"{A10}.cpu": 4.5},
            },
        }
    )
    assert args.sra.weight == 3
    assert args.sra.weights() == {T4: 1, A10: 2}
    assert args.proportional.rates() == {T4: (3.0, 6.0), A10: (4.5, 1.0)}


@pytest.mark.parametrize(
    ("args", "key"),
    [
        pytest.param({"resourceStrategyFitWeight": -1}, "resourceStrategyFitWeight", id="negative"),
        pytest.param({"resourceStrategyFitWeight": "10"}, "resourceStrategyFitWeight", id="text"),
        pytest.param({"resourceStrategyFitWieght": 10}, "resourceStrategyFitWieght", id="typo"),
        pytest.param({"resources": {"cpu": {"type": "Spread"}}}, "['cpu']['type']", id="type"),
        pytest.param({"resources": {"cpu": {"weight": 0}}}, "['cpu']['weight']", id="weight 0"),
        pytest.param({"resources": {"cpu": {"wieght": 2}}}, "['cpu']['wieght']", id="entry typo"),
        pytest.param({"resources": {"*": {}}}, "'*' alone", id="a lone star"),
        pytest.param({"resources": {"cloudml.gpu**": {}}}, "cloudml.gpu**", id="two stars"),
        pytest.param({"resources": {"cloudml.*.gpu": {}}}, "cloudml.*.gpu", id="inner star"),
        pytest.param({"resources": {"*.com/gpu": {}}}, "*.com/gpu", id="leading star"),
        pytest.param({"sra": {"enable": "yes"}}, "['sra']['enable']", id="sra enable text"),
        pytest.param({"sra": {"weight": -2}}, "['sra']['weight']", id="sra weight negative"),
        pytest.param(
            {"sra": {"resources": T4, "resourceWeight": {A10: 1}}},
            f"resourceWeight['{A10}']",
            id="sra weight of an unlisted resource",
        ),
        pytest.param(
            {"proportional": {"resources": GPU, "resourceProportion": {f"{GPU}.cores": 4}}},
            f"resourceProportion['{GPU}.cores']",
            id="proportion key without .cpu or .memory",
        ),
        pytest.param(
            {"proportional": {"resources": GPU, "resourceProportion": {f"{GPU}.cpu": -1}}},
            f"resourceProportion['{GPU}.cpu']",
            id="negative proportion",
        ),
        pytest.param({"proportional": {"enabled": True}}, "['proportional']['enabled']", id="typo"),
    ],
)
def test_invalid_arguments_are_rejected_at_policy_load_naming_the_key(
    args: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError) as err:
        policy(rsf_policy(args))
    assert key in str(err.value)


@pytest.mark.parametrize(
    ("name", "table", "expected"),
    [
        pytest.param(GPU, {GPU: 3, "nvidia.com/*": 1}, 3, id="an exact name wins over a pattern"),
        pytest.param(
            "nvidia.com/gpu/v100",
            {"nvidia.com/gpu/*": 2, "nvidia.com/*": 1},
            2,
            id="the longest matching prefix wins",
        ),
        pytest.param(FOO, {"nvidia.com/gpu/*": 2}, None, id="no match"),
        pytest.param("any.resource", {}, None, id="an empty table"),
        pytest.param(
            "cloudml.gpu/tensorflow/v2",
            {"cloudml.gpu/tensorflow/*": 3, "cloudml.gpu/*": 2, "cloudml/*": 1},
            3,
            id="several patterns match: the most specific one",
        ),
    ],
)
def test_resource_names_resolve_exactly_then_by_longest_prefix(
    name: str, table: dict[str, int], expected: int | None
) -> None:
    assert resolve(table, name) == expected


# -- strategy scores ---------------------------------------------------------------------------


def one_node_score(
    args: Mapping[str, Any] | None,
    *,
    cpu: str | None = "100m",
    memory: str | None = "100",
    node_cpu: str = "500m",
    node_memory: str = "500",
    annotations: Mapping[str, str] | None = None,
) -> float:
    """Volcano's TestScore shape: a node of ``node_cpu``/``node_memory`` with 200m cpu and 200
    bytes in use, and a pending pod asking for ``cpu``/``memory``."""
    objs: list[Obj] = [
        node("n1", cpu=node_cpu, memory=node_memory),
        pod("busy", cpu="200m", memory="200", node_name="n1", scheduler="default-scheduler"),
        podgroup("pg"),
        pod("p", group="pg", cpu=cpu, memory=memory, annotations=annotations),
    ]
    ssn = open_session(objs, rsf_policy(args))
    return float(ssn.node_order(task_named(ssn, "p"), np.arange(1, dtype=np.intp))[0])


def weighted(cpu: tuple[str, int], memory: tuple[str, int], weight: int = 10) -> dict[str, Any]:
    return {
        "resourceStrategyFitWeight": weight,
        "resources": strategies({"cpu": cpu, "memory": memory}),
    }


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        pytest.param(weighted((LA, 1), (LA, 1)), {}, 400, id="test1 least allocated"),
        pytest.param(
            weighted((LA, 1), (LA, 1)),
            {"node_cpu": "400m", "node_memory": "400"},
            250,
            id="test2 least allocated on a smaller node",
        ),
        pytest.param(weighted((MA, 1), (MA, 1)), {}, 600, id="test3 most allocated"),
        pytest.param(
            weighted((MA, 1), (MA, 1)),
            {"node_cpu": "400m", "node_memory": "400"},
            750,
            id="test4 most allocated on a smaller node",
        ),
        pytest.param(weighted((LA, 2), (MA, 1)), {}, 466.66666667, id="test5 mixed, cpu heavier"),
        pytest.param(
            weighted((LA, 1), (MA, 2)), {}, 533.33333333, id="test6 mixed, memory heavier"
        ),
        pytest.param(
            weighted((LA, 1), (MA, 2)), {"cpu": None}, 600, id="test7 an unrequested resource"
        ),
        pytest.param(
            {"resources": strategies({"memory": (MA, 2)})},
            {},
            600,
            id="test9 a resource the table does not name is not scored",
        ),
        pytest.param(
            weighted((LA, 1), (LA, 1)),
            {"cpu": None, "memory": None},
            0,
            id="a pod requesting nothing scores 0",
        ),
        pytest.param(
            weighted((LA, 1), (LA, 1)),
            {"node_cpu": "200m", "node_memory": "200"},
            0,
            id="a node the pod would overflow scores 0",
        ),
        pytest.param(weighted((LA, 3), (MA, 1)), {}, 450, id="mixed strategies, weights 3 and 1"),
        pytest.param(weighted((LA, 5), (LA, 5), weight=20), {}, 800, id="plugin weight 20"),
        pytest.param(None, {}, 400, id="default arguments"),
        pytest.param({"resourceStrategyFitWeight": 0}, {}, 0, id="plugin weight 0 is off"),
    ],
)
def test_strategy_score_matches_volcano(
    args: dict[str, Any] | None, kwargs: dict[str, Any], expected: float
) -> None:
    assert one_node_score(args, **kwargs) == pytest.approx(expected, abs=1e-6)


def test_a_node_without_a_scored_resource_scores_it_zero_but_keeps_its_weight() -> None:
    # Volcano's test8: cpu allocatable 0 (LeastAllocated, weight 1) and memory MostAllocated
    # weight 2 at 300/400: (0 + 2 · 0.75) / 3 × 1000 (here no cpu is in use on the cpu-less node).
    objs: list[Obj] = [
        node("n1", cpu="0", memory="400"),
        pod("busy", cpu=None, memory="200", node_name="n1", scheduler="default-scheduler"),
        podgroup("pg"),
        pod("p", group="pg", cpu="100m", memory="100"),
    ]
    ssn = open_session(objs, rsf_policy(weighted((LA, 1), (MA, 2))))
    score = ssn.node_order(task_named(ssn, "p"), np.arange(1, dtype=np.intp))[0]
    assert score == pytest.approx(500)


# -- pod annotations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param(
            {SCORING_TYPE_ANNOTATION: LA, WEIGHT_ANNOTATION: '{"cpu": 2, "memory": 1}'},
            400,
            id="LeastAllocated with its own weights",
        ),
        pytest.param(
            {SCORING_TYPE_ANNOTATION: MA, WEIGHT_ANNOTATION: '{"cpu": 1, "memory": 2}'},
            600,
            id="MostAllocated overrides the policy's LeastAllocated",
        ),
        pytest.param(
            {SCORING_TYPE_ANNOTATION: LA, WEIGHT_ANNOTATION: '{"cpu": 2}'},
            400,
            id="only the resources in the weight map are scored",
        ),
        pytest.param({SCORING_TYPE_ANNOTATION: MA}, 600, id="a type alone keeps the weights"),
        pytest.param(
            {WEIGHT_ANNOTATION: '{"cpu": 3, "memory": 1}'},
            400,
            id="weights alone keep the policy's types",
        ),
        pytest.param(
            {SCORING_TYPE_ANNOTATION: LA, WEIGHT_ANNOTATION: "invalid-json"},
            0,
            id="weights that are not JSON score 0",
        ),
        pytest.param({WEIGHT_ANNOTATION: '["cpu"]'}, 0, id="weights that are not a map score 0"),
        pytest.param({WEIGHT_ANNOTATION: '{"cpu": 1.5}'}, 0, id="a fractional weight scores 0"),
        pytest.param({WEIGHT_ANNOTATION: '{"cpu": -1}'}, 0, id="a negative weight scores 0"),
        pytest.param({SCORING_TYPE_ANNOTATION: "Balanced"}, 0, id="an unknown type scores 0"),
    ],
)
def test_pod_annotations_override_the_strategy(
    annotations: dict[str, str], expected: float, caplog: pytest.LogCaptureFixture
) -> None:
    assert one_node_score(weighted((LA, 1), (LA, 1)), annotations=annotations) == pytest.approx(
        expected
    )
    assert ("resource-strategy-fit scores it 0" in caplog.text) == (expected == 0)


def test_pods_with_equal_requests_but_different_annotations_do_not_share_cached_scores() -> None:
    objs: list[Obj] = [
        node("n1", cpu="4", memory="8Gi"),
        node("n2", cpu="4", memory="8Gi"),
        pod("busy", cpu="2", memory="4Gi", node_name="n1", scheduler="default-scheduler"),
        podgroup("pg"),
        pod("spread", group="pg"),
        pod("pack", group="pg", annotations={SCORING_TYPE_ANNOTATION: MA}),
    ]
    ssn = open_session(objs, rsf_policy())
    table = score_table(ssn, ["spread", "pack", "spread"])
    # spread: n1 (1/4 + 3/8) / 2 × 1000, n2 (3/4 + 7/8) / 2 × 1000; pack: the complements
    assert table == {"spread": by_node(312.5, 812.5), "pack": by_node(687.5, 187.5)}


# -- Volcano's plugin tables ---------------------------------------------------------------------


def test_volcano_extended_resource_table() -> None:
    objs: list[Obj] = [
        node("n1", extra={GPU: "10"}),
        node("n2", extra={GPU: "5"}),
        node("n3", extra={FOO: "10"}),
        node("n4", extra={FOO: "5"}),
        podgroup("pg"),
        pod("p1", group="pg", extra={FOO: "2"}),
        pod("p2", group="pg", extra={FOO: "3"}),
        pod("p3", group="pg", memory="10Gi", extra={GPU: "2"}),
        pod("p4", group="pg", extra={GPU: "3"}),
    ]
    args = {"resources": strategies({GPU: (MA, 1), FOO: (LA, 1)})}
    ssn = open_session(objs, rsf_policy(args))
    assert score_table(ssn, ["p1", "p2", "p3", "p4"]) == {
        "p1": by_node(0, 0, 800, 600),
        "p2": by_node(0, 0, 700, 400),
        "p3": by_node(200, 400, 0, 0),
        "p4": by_node(300, 600, 0, 0),
    }


def test_volcano_two_extended_resources_table() -> None:
    objs: list[Obj] = [
        node("n5", extra={GPU: "10", FOO: "5"}),
        node("n6", extra={FOO: "10"}),
        podgroup("pg"),
        pod("p5", group="pg", extra={GPU: "4", FOO: "4"}),
    ]
    args = {"resources": strategies({GPU: (MA, 1), FOO: (LA, 2)})}
    ssn = open_session(objs, rsf_policy(args))
    assert score_table(ssn, ["p5"])["p5"] == {
        "n5": pytest.approx(800 / 3),
        "n6": pytest.approx(400),
    }


def test_a_wildcard_entry_scores_every_resource_under_its_prefix() -> None:
    objs: list[Obj] = [
        node("n1", extra={T4: "4"}),
        node("n2", extra={T4: "4"}),
        pod(
            "busy",
            cpu=None,
            memory=None,
            extra={T4: "2"},
            node_name="n1",
            scheduler="default-scheduler",
        ),
        podgroup("pg"),
        pod("p", group="pg", cpu=None, memory=None, extra={T4: "1"}),
    ]
    args = {"resources": {"nvidia.com/*": {"type": MA, "weight": 1}}}
    ssn = open_session(objs, rsf_policy(args))
    assert score_table(ssn, ["p"])["p"] == by_node(750, 250)


# -- SRA ---------------------------------------------------------------------------------------


def sra_objects() -> list[Obj]:
    return [
        node("n1", cpu="32", memory="64Gi"),
        node("n2", cpu="8", memory="16Gi", extra={T4: "16"}),
        node("n3", cpu="8", memory="16Gi", extra={A10: "16"}),
        node("n4", cpu="8", memory="16Gi", extra={T4: "8", A10: "16"}),
        podgroup("pg"),
        pod("p1", group="pg", cpu="1", memory="1Gi"),
        pod("p2", group="pg", cpu="1.5", memory=None, extra={T4: "2"}),
        pod("p3", group="pg", cpu="2", memory="4Gi", extra={A10: "2"}),
        pod("p4", group="pg", cpu="3", memory="4Gi", extra={T4: "1", A10: "3"}),
    ]


def sra(resources: str, weight: int, resource_weight: dict[str, int]) -> dict[str, Any]:
    return {
        "enable": True,
        "resources": resources,
        "weight": weight,
        "resourceWeight": resource_weight,
    }


T4_MOST = strategies({T4: (MA, 3), "cpu": (LA, 1)})


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            {"resourceStrategyFitWeight": 0, "sra": sra(f"{T4}, {A10}", 5, {T4: 2, A10: 3})},
            {
                "p1": [500, 300, 200, 0],
                "p2": [0, 300, 0, 0],
                "p3": [0, 0, 200, 0],
                "p4": [0, 0, 0, 0],
            },
            id="case1 two scarce resources",
        ),
        pytest.param(
            {"resourceStrategyFitWeight": 0, "sra": sra(T4, 5, {T4: 2})},
            {"p1": [500, 0, 500, 0], "p2": [0, 0, 0, 0], "p3": [0, 0, 500, 0], "p4": [0, 0, 0, 0]},
            id="case2 one scarce resource",
        ),
        pytest.param(
            {"resourceStrategyFitWeight": 8, "resources": T4_MOST, "sra": sra(T4, 0, {T4: 2})},
            {
                "p1": [775, 700, 700, 700],
                "p2": [190.625, 237.5, 162.5, 312.5],
                "p3": [750, 600, 600, 600],
                "p4": [181.25, 162.5, 125, 200],
            },
            id="case3 sra weight 0 leaves the strategy score alone",
        ),
        pytest.param(
            {"resourceStrategyFitWeight": 8, "resources": T4_MOST, "sra": sra(T4, 5, {T4: 2})},
            {
                "p1": [1275, 700, 1200, 700],
                "p2": [190.625, 237.5, 162.5, 312.5],
                "p3": [750, 600, 1100, 600],
                "p4": [181.25, 162.5, 125, 200],
            },
            id="case4 sra and strategy scores add up",
        ),
    ],
)
def test_sra_scores_match_volcano(args: dict[str, Any], expected: dict[str, list[float]]) -> None:
    ssn = open_session(sra_objects(), rsf_policy(args))
    table = score_table(ssn, list(expected))
    assert table == {k: by_node(*v) for k, v in expected.items()}


def test_sra_steers_a_pod_that_needs_no_gpu_away_from_gpu_nodes() -> None:
    objs: list[Obj] = [
        node("gpu", cpu="8", memory="16Gi", extra={GPU: "4"}),
        node("cpu", cpu="8", memory="16Gi"),
        pod("busy", cpu="4", memory="8Gi", node_name="cpu", scheduler="default-scheduler"),
        podgroup("pg", min_member=1),
        pod("web", group="pg"),
    ]
    without = open_session(objs, rsf_policy(None, predicates=True))
    with_sra = open_session(objs, rsf_policy({"sra": sra(GPU, 10, {})}, predicates=True))
    plain = score_table(without, ["web"])["web"]
    avoided = score_table(with_sra, ["web"])["web"]
    assert plain["gpu"] > plain["cpu"]  # least allocated alone prefers the empty GPU node
    assert avoided["gpu"] < avoided["cpu"]


def test_sra_without_a_weight_scores_nothing_as_in_volcano() -> None:
    ssn = open_session(
        sra_objects(),
        rsf_policy({"resourceStrategyFitWeight": 0, "sra": {"enable": True, "resources": T4}}),
    )
    assert score_table(ssn, ["p1"])["p1"] == by_node(0, 0, 0, 0)
