"""predicates: NodeUnschedulable, NodeAffinity (nodeSelector and required terms), TaintToleration,
their switches, and how every failing reason of every node reaches the pending message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from builders import (
    Obj,
    binds,
    node,
    open_session,
    pod,
    podgroup,
    policy,
    policy_text,
    scenario,
    summary,
)
from caldera.models.core import NodeSelectorRequirement
from caldera.plugins.node_match import requirement_mask

AFFINITY = "node(s) didn't match Pod's node affinity/selector"
UNSCHEDULABLE = "node(s) were unschedulable"


def predicates_policy(args: Mapping[str, Any] | None = None) -> str:
    return policy_text("enqueue, allocate", ["gang", "predicates"], arguments={"predicates": args})


def rejections(
    nodes: list[Obj], args: Mapping[str, Any] | None = None, **pod_kwargs: Any
) -> dict[str, list[str]]:
    """reason → names of the nodes rejected for it, for one pending pod."""
    ssn = open_session(
        [*nodes, podgroup("pg"), pod("p", group="pg", **pod_kwargs)], predicates_policy(args)
    )
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    out: dict[str, list[str]] = {}
    for reason, mask in ssn.predicate(task):
        out.setdefault(reason, []).extend(ssn.nodes.names[i] for i in np.flatnonzero(mask))
    return {k: sorted(v) for k, v in out.items()}


# -- requirement_mask: one requirement over one label column ---------------------------------

COLUMN = np.array(["1", "5", None, "abc", "10", "+7", "1_0", " 7", "-3"], dtype=object)


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        pytest.param("In", ("1", "5"), [0, 1], id="In: the label has one of the values"),
        pytest.param(
            "NotIn", ("1",), [1, 2, 3, 4, 5, 6, 7, 8], id="NotIn: also matches a missing label"
        ),
        pytest.param("Exists", (), [0, 1, 3, 4, 5, 6, 7, 8], id="Exists: the label is present"),
        pytest.param("DoesNotExist", (), [2], id="DoesNotExist: the label is absent"),
        pytest.param(
            "Gt",
            ("4",),
            [1, 4, 5],
            id="Gt: integer labels above; '+7' parses as Go's ParseInt does, '1_0' and ' 7' do not",
        ),
        pytest.param("Lt", ("5",), [0, 8], id="Lt: integer labels below; absent or text never"),
        pytest.param("Gt", ("-4",), [0, 1, 4, 5, 8], id="Gt with a negative bound"),
    ],
)
def test_requirement_mask(operator: str, values: tuple[str, ...], expected: list[int]) -> None:
    req = NodeSelectorRequirement.model_validate(
        {"key": "k", "operator": operator, "values": values}
    )
    assert list(np.flatnonzero(requirement_mask(COLUMN, req))) == expected


# -- NodeAffinity -----------------------------------------------------------------------------

AFFINITY_NODES: list[Obj] = [
    node("n1", labels={"zone": "a", "gpu-count": "2"}),
    node("n2", labels={"zone": "b", "gpu-count": "8"}),
    node("n3"),
]


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


@pytest.mark.parametrize(
    ("pod_kwargs", "fits"),
    [
        pytest.param({}, ["n1", "n2", "n3"], id="no constraint fits every node"),
        pytest.param({"node_selector": {"zone": "a"}}, ["n1"], id="nodeSelector"),
        pytest.param(
            {"node_selector": {"zone": "a", "gpu-count": "8"}},
            [],
            id="every nodeSelector label must match",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("zone", "In", "a", "b")]})},
            ["n1", "n2"],
            id="In",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("zone", "NotIn", "a")]})},
            ["n2", "n3"],
            id="NotIn matches nodes without the label",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("zone", "Exists")]})},
            ["n1", "n2"],
            id="Exists",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("zone", "DoesNotExist")]})},
            ["n3"],
            id="DoesNotExist",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("gpu-count", "Gt", "4")]})},
            ["n2"],
            id="Gt compares integers (8 > 4, not '2' > '4' as text)",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("gpu-count", "Lt", "4")]})},
            ["n1"],
            id="Lt",
        ),
        pytest.param(
            {"affinity": required({"matchFields": [expr("metadata.name", "In", "n3")]})},
            ["n3"],
            id="matchFields on metadata.name In",
        ),
        pytest.param(
            {"affinity": required({"matchFields": [expr("metadata.name", "NotIn", "n1")]})},
            ["n2", "n3"],
            id="matchFields on metadata.name NotIn",
        ),
        pytest.param(
            {
                "affinity": required(
                    {
                        "matchExpressions": [
                            expr("zone", "In", "a", "b"),
                            expr("gpu-count", "Gt", "4"),
                        ]
                    }
                )
            },
            ["n2"],
            id="expressions within a term are ANDed",
        ),
        pytest.param(
            {
                "affinity": required(
                    {
                        "matchExpressions": [expr("zone", "Exists")],
                        "matchFields": [expr("metadata.name", "NotIn", "n1")],
                    }
                )
            },
            ["n2"],
            id="expressions and fields within a term are ANDed",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [expr("zone", "In", "a")]},
                    {"matchFields": [expr("metadata.name", "In", "n3")]},
                )
            },
            ["n1", "n3"],
            id="terms are ORed",
        ),
        pytest.param({"affinity": required({})}, [], id="an empty term matches nothing"),
        pytest.param(
            {"affinity": required({}, {"matchExpressions": [expr("zone", "In", "b")]})},
            ["n2"],
            id="an empty term ORed with a matching one",
        ),
        pytest.param({"affinity": required()}, [], id="no terms at all matches nothing"),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("zone", "NotIn", "$")]})},
            [],
            id="a value that is not a label value makes the term match nothing",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [expr("zone", "NotIn", "$")]},
                    {"matchExpressions": [expr("zone", "In", "b")]},
                )
            },
            ["n2"],
            id="an invalid term ORed with a matching one",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchExpressions": [expr("zone", "Exists"), expr("gpu-count", "Gt", "two")]}
                )
            },
            [],
            id="a Gt bound that is not an integer makes the term match nothing",
        ),
        pytest.param(
            {"affinity": required({"matchExpressions": [expr("bad key", "DoesNotExist")]})},
            [],
            id="a key that is not a qualified name makes the term match nothing",
        ),
        pytest.param(
            {"affinity": required({"matchFields": [expr("metadata.name", "In", "n1", "n2")]})},
            [],
            id="matchFields with two values make the term match nothing",
        ),
        pytest.param(
            {
                "affinity": required(
                    {
                        "matchExpressions": [expr("zone", "Exists")],
                        "matchFields": [expr("metadata.name", "Exists")],
                    }
                )
            },
            [],
            id="matchFields with an operator other than In and NotIn make the term match nothing",
        ),
        pytest.param(
            {
                "node_selector": {"zone": "a"},
                "affinity": required({"matchExpressions": [expr("gpu-count", "Gt", "4")]}),
            },
            [],
            id="nodeSelector and required affinity must both match",
        ),
    ],
)
def test_node_affinity(pod_kwargs: dict[str, Any], fits: list[str]) -> None:
    rejected = sorted({"n1", "n2", "n3"} - set(fits))
    assert rejections(AFFINITY_NODES, **pod_kwargs) == ({AFFINITY: rejected} if rejected else {})


def test_identical_pods_share_the_cached_answer_and_different_pods_do_not() -> None:
    ssn = open_session(
        [
            *AFFINITY_NODES,
            podgroup("pg"),
            pod("a1", group="pg", node_selector={"zone": "a"}),
            pod("a2", group="pg", node_selector={"zone": "a"}),
            pod("b1", group="pg", node_selector={"zone": "b"}),
        ],
        predicates_policy(),
    )
    tasks = {t.name: t for t in ssn.jobs["default/pg"].tasks.values()}
    masks = {n: [list(np.flatnonzero(m)) for _, m in ssn.predicate(t)] for n, t in tasks.items()}
    assert masks == {"a1": [[1, 2]], "a2": [[1, 2]], "b1": [[0, 2]]}


# -- TaintToleration and NodeUnschedulable ------------------------------------------------


def taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


TAINTED: list[Obj] = [
    node("t1", taints=[taint("k1", "v1", "NoSchedule")]),
    node("t2", taints=[taint("k2", "v2", "NoExecute")]),
    node("t3", taints=[taint("k3", "v3", "PreferNoSchedule")]),
    node("t4"),
]
K1 = "node(s) had untolerated taint {k1: v1}"
K2 = "node(s) had untolerated taint {k2: v2}"


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param(
            [],
            {K1: ["t1"], K2: ["t2"]},
            id="NoSchedule and NoExecute filter, PreferNoSchedule does not",
        ),
        pytest.param(
            [{"key": "k1", "operator": "Equal", "value": "v1", "effect": "NoSchedule"}],
            {K2: ["t2"]},
            id="an Equal toleration with the same value",
        ),
        pytest.param(
            [{"key": "k1", "value": "v1"}],
            {K2: ["t2"]},
            id="an empty operator means Equal and an empty effect matches every effect",
        ),
        pytest.param(
            [{"key": "k1", "operator": "Equal", "value": "other"}],
            {K1: ["t1"], K2: ["t2"]},
            id="a different value does not tolerate",
        ),
        pytest.param(
            [{"key": "k2", "operator": "Exists", "effect": "NoSchedule"}],
            {K1: ["t1"], K2: ["t2"]},
            id="a toleration for another effect does not tolerate",
        ),
        pytest.param(
            [{"key": "k2", "operator": "Exists"}], {K1: ["t1"]}, id="Exists ignores the value"
        ),
        pytest.param([{"operator": "Exists"}], {}, id="Exists without a key tolerates everything"),
    ],
)
def test_taint_toleration(
    tolerations: list[dict[str, str]], expected: dict[str, list[str]]
) -> None:
    assert rejections(TAINTED, tolerations=tolerations) == expected


def test_the_first_untolerated_taint_names_the_reason() -> None:
    nodes: list[Obj] = [
        node("n1", taints=[taint("a", "1", "NoSchedule"), taint("b", "2", "NoExecute")])
    ]
    assert rejections(nodes) == {"node(s) had untolerated taint {a: 1}": ["n1"]}
    assert rejections(nodes, tolerations=[{"key": "a", "operator": "Exists"}]) == {
        "node(s) had untolerated taint {b: 2}": ["n1"]
    }


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param([], {UNSCHEDULABLE: ["u1"]}, id="a cordoned node is rejected"),
        pytest.param(
            [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
            ],
            {},
            id="unless the pod tolerates node.kubernetes.io/unschedulable:NoSchedule",
        ),
        pytest.param([{"operator": "Exists"}], {}, id="a tolerate-everything toleration"),
        pytest.param(
            [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                }
            ],
            {UNSCHEDULABLE: ["u1"]},
            id="a NoExecute toleration is not enough",
        ),
    ],
)
def test_node_unschedulable(
    tolerations: list[dict[str, str]], expected: dict[str, list[str]]
) -> None:
    nodes: list[Obj] = [node("u1", unschedulable=True), node("u2")]
    assert rejections(nodes, tolerations=tolerations) == expected


# -- switches ----------------------------------------------------------------------------------

SWITCH_NODES: list[Obj] = [
    node("n1", unschedulable=True),
    node("n2", taints=[taint("k", "v", "NoSchedule")]),
    node("n3", labels={"zone": "b"}),
]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            None,
            {
                UNSCHEDULABLE: ["n1"],
                "node(s) had untolerated taint {k: v}": ["n2"],
                AFFINITY: ["n1", "n2", "n3"],
            },
            id="all filters on by default",
        ),
        pytest.param(
            {"predicate.NodeAffinityEnable": False},
            {UNSCHEDULABLE: ["n1"], "node(s) had untolerated taint {k: v}": ["n2"]},
            id="NodeAffinityEnable false turns nodeSelector and affinity off",
        ),
        pytest.param(
            {"predicate.TaintTolerationEnable": False},
            {UNSCHEDULABLE: ["n1"], AFFINITY: ["n1", "n2", "n3"]},
            id="TaintTolerationEnable false turns taints off",
        ),
        pytest.param(
            {"predicate.NodeAffinityEnable": False, "predicate.TaintTolerationEnable": False},
            {UNSCHEDULABLE: ["n1"]},
            id="NodeUnschedulable has no switch",
        ),
    ],
)
def test_switches(args: dict[str, bool] | None, expected: dict[str, list[str]]) -> None:
    assert rejections(SWITCH_NODES, args, node_selector={"zone": "a"}) == expected


def test_switch_of_the_wrong_type_is_rejected_at_policy_load() -> None:
    from caldera.errors import ConfigError

    with pytest.raises(ConfigError, match="NodeAffinityEnable"):
        policy(predicates_policy({"predicate.NodeAffinityEnable": "no"}))


# -- end to end: placement and the pending message ------------------------------------------


def test_each_node_counts_under_the_first_filter_that_refuses_it_for_good() -> None:
    # PredicatesPlugin.Predicate stops at a filter whose status is UnschedulableAndUnresolvable
    # (util.ShouldAbort): the cordoned, tainted node counts as unschedulable only
    nodes: list[Obj] = [
        node(
            "n1", labels={"zone": "a"}, unschedulable=True, taints=[taint("k", "v", "NoSchedule")]
        ),
        node("n2", labels={"zone": "a"}, taints=[taint("k", "v", "NoSchedule")]),
        node("n3", labels={"zone": "b"}),
    ]
    sim = scenario([*nodes, podgroup("pg"), pod("p", group="pg", node_selector={"zone": "a"})])
    assert binds(sim) == {}
    assert summary(sim)["unschedulable"]["default/p"] == (
        "0/3 nodes are available: "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {k: v}, "
        "1 node(s) were unschedulable."
    )


@pytest.mark.parametrize(
    ("pod_kwargs", "node_name"),
    [
        pytest.param({"node_selector": {"zone": "b"}}, "n3", id="nodeSelector steers the pod"),
        pytest.param(
            {"tolerations": [{"key": "k", "operator": "Exists"}], "node_selector": {"zone": "a"}},
            "n2",
            id="a toleration opens the tainted node",
        ),
        pytest.param(
            {
                "affinity": required(
                    {"matchFields": [expr("metadata.name", "In", "n1")]},
                    {"matchFields": [expr("metadata.name", "In", "n3")]},
                )
            },
            "n3",
            id="the cordoned node stays closed even when affinity names it",
        ),
    ],
)
def test_placement_respects_the_filters(pod_kwargs: dict[str, Any], node_name: str) -> None:
    nodes: list[Obj] = [
        node("n1", labels={"zone": "a"}, unschedulable=True),
        node("n2", labels={"zone": "a"}, taints=[taint("k", "v", "NoSchedule")]),
        node("n3", labels={"zone": "b"}),
    ]
    sim = scenario([*nodes, podgroup("pg"), pod("p", group="pg", **pod_kwargs)])
    assert binds(sim) == {"default/p": node_name}


@pytest.mark.parametrize(
    ("slots", "bound", "unschedulable"),
    [
        pytest.param(
            "1",
            {},
            {"default/p": "0/1 nodes are available: 1 Too many pods."},
            id="a full pod slot rejects with too many pods",
        ),
        pytest.param("2", {"default/p": "n1"}, {}, id="a free pod slot is used"),
    ],
)
def test_a_pod_needs_a_pod_slot_beside_another_schedulers_pod(
    slots: str, bound: dict[str, str], unschedulable: dict[str, str]
) -> None:
    sim = scenario(
        [
            node("n1", pods=slots),
            pod("already-there", node_name="n1", scheduler="default-scheduler"),
            podgroup("pg"),
            pod("p", group="pg"),
        ]
    )
    assert binds(sim) == bound
    assert summary(sim)["unschedulable"] == unschedulable
