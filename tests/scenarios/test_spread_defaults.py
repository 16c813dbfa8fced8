"""PodTopologySpread's system default constraints (Volcano runs kube's plugin with
``defaultingType: System``).

Expected scores are worked out by hand from kube-scheduler's rules:

- a pod with no ``topologySpreadConstraints`` of its own gets ``kubernetes.io/hostname`` maxSkew 3
  and ``topology.kubernetes.io/zone`` maxSkew 5, both ScheduleAnyway, when its default selector
  is not empty; the selector joins the selectors of the Services in its namespace that match its
  labels and of its controller (owner reference with ``controller: true``) when that is a
  ``v1`` ReplicationController or an ``apps/v1`` ReplicaSet or StatefulSet of that name;
- scoring as for the pod's own ScheduleAnyway constraints, except that no candidate is ignored:
  one without the zone label adds nothing for the zone constraint, and the candidates without it
  count as one more zone in the weight ``ln(zones + 2)``;
- the filter never sees them (they are all ScheduleAnyway).

Test ids in quotes are kube-scheduler's own test cases (scoring_test.go) redone here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from builders import (
    Obj,
    binds,
    node,
    open_session,
    owner,
    pod,
    podgroup,
    policy_text,
    replica_set,
    replication_controller,
    scenario,
    service,
    stateful_set,
)
from caldera.api.task import Task
from caldera.framework.session import Session
from caldera.plugins.nodeorder import NodeOrderPlugin, per_row
from caldera.plugins.predicates import PredicatesPlugin

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
FOO = {"foo": ""}
NODEORDER = policy_text("enqueue, allocate", ["gang", "predicates", "nodeorder"])


def host(name: str, zone: str | None = None, cpu: str = "16") -> Obj:
    """A node with its hostname label and, when given, a zone."""
    labels = {HOST: name} | ({ZONE: zone} if zone else {})
    return node(name, cpu=cpu, labels=labels)


def placed(
    on: str, count: int, labels: Mapping[str, str] = FOO, *, ns: str = "default"
) -> list[Obj]:
    """``count`` running pods on ``on`` (requesting nothing, so resources stay equal)."""
    tag = "-".join(f"{k}{v}" for k, v in labels.items())
    return [
        pod(
            f"{on}-{tag}-{ns}-{i}",
            namespace=ns,
            node_name=on,
            scheduler="default-scheduler",
            cpu=None,
            memory=None,
            labels=labels,
        )
        for i in range(count)
    ]


def incoming(labels: Mapping[str, str] = FOO, **kwargs: Any) -> list[Obj]:
    return [podgroup("pg"), pod("p", group="pg", labels=labels, **kwargs)]


def task_of(ssn: Session) -> Task:
    return next(t for t in ssn.jobs["default/pg"].tasks.values() if t.name == "p")


def scores(objects: Sequence[Obj]) -> list[float]:
    """PodTopologySpread's score of pod ``p`` on every node, all of them candidates."""
    ssn = open_session(objects, NODEORDER)
    plugin = next(p for p in ssn.plugins if isinstance(p, NodeOrderPlugin))
    (scorer,) = (s for s in plugin.scorers if s.name == "podtopologyspread")
    idx = np.arange(len(ssn.nodes), dtype=np.intp)
    result: list[float] = per_row(scorer.fn(task_of(ssn), idx), len(idx)).tolist()
    return result


# -- scores ---------------------------------------------------------------------------------------

NO_ZONES = [host("a"), host("b"), host("c"), host("d")]
SPREAD_4321 = [*placed("a", 4), *placed("b", 3), *placed("c", 2), *placed("d", 1)]
# a and b in zone mars; c and d have no zone label
MARS = [host("a", "mars"), host("b", "mars"), host("c"), host("d")]


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [*NO_ZONES, *SPREAD_4321, service("web", FOO), *incoming()],
            # hostname weight ln 6, + maxSkew 3 − 1: raw 9.17 → 9, 7.37 → 7, 5.58 → 6, 3.79 → 4;
            # no node has a zone, so the zone constraint adds nothing anywhere
            [44, 66, 77, 100],
            id="'system defaulting, nodes don't have zone, pods match service'",
        ),
        pytest.param(
            [*NO_ZONES, *SPREAD_4321, *incoming()],
            [0, 0, 0, 0],
            id="'the pod doesn't have soft topology spread Constraints' (nothing selects it)",
        ),
        pytest.param(
            [
                *MARS,
                *placed("a", 2),
                *placed("b", 2),
                *placed("d", 3),
                replica_set("rs1", {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}),
                *incoming(owners=[owner("ReplicaSet", "rs1")]),
            ],
            # hostname weight ln 6 (4 candidates); zone weight ln 4: mars and the zone-less
            # nodes are two zones. a: 2·1.79 + 2 + 4·1.39 + 4 = 15.13 → 15; b the same;
            # c: 0 + 2 = 2 (no zone term); d: 3·1.79 + 2 = 7.38 → 7. 100·(15 + 2 − raw) // 15
            [13, 13, 100, 66],
            id="'system default constraints and a replicaset': zone-less nodes are one more zone",
        ),
        pytest.param(
            [
                *NO_ZONES,
                *SPREAD_4321,
                replica_set("rs1", {"matchExpressions": [{"key": "tar", "operator": "Exists"}]}),
                *incoming(owners=[owner("ReplicaSet", "rs2")]),
            ],
            [0, 0, 0, 0],
            id="'default constraints and a replicaset that doesn't match': rs2 does not exist",
        ),
        pytest.param(
            [
                *MARS,
                *placed("a", 2),
                *placed("c", 1, {"baz": "sup"}),
                replica_set("rs1", {"matchLabels": FOO}),
                *incoming(
                    {"foo": "", "baz": "sup"},
                    owners=[owner("ReplicaSet", "rs1")],
                    topology_spread_constraints=[
                        {
                            "maxSkew": 1,
                            "topologyKey": HOST,
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": {"baz": "sup"}},
                        }
                    ],
                ),
            ],
            # only the pod's own constraint: baz=sup pods per host, weight ln 6: c 1.79 → 2
            [100, 100, 0, 100],
            id="'default constraints and a replicaset, but pod has constraints'",
        ),
    ],
)
def test_scores(objects: list[Obj], expected: list[int]) -> None:
    assert scores(objects) == expected


# which objects select the pod: with pods foo=1 on a (4), b (3), c (2), d (1) and the incoming
# pod labelled foo=1, any default selector that is just foo=1 scores [44, 66, 77, 100].
SPREAD_FOO1 = [
    *placed("a", 4, {"foo": "1"}),
    *placed("b", 3, {"foo": "1"}),
    *placed("c", 2, {"foo": "1"}),
    *placed("d", 1, {"foo": "1"}),
]
SPREAD = [44, 66, 77, 100]
NONE = [0, 0, 0, 0]
FOO1 = {"foo": "1"}


@pytest.mark.parametrize(
    ("selectors", "pod_kwargs", "expected"),
    [
        pytest.param([service("s", FOO1)], {}, SPREAD, id="a Service whose selector matches"),
        pytest.param(
            [service("s", {"foo": "2"})], {}, NONE, id="a Service whose selector does not match"
        ),
        pytest.param(
            [service("s", FOO1, namespace="other")],
            {},
            NONE,
            id="a Service in another namespace",
        ),
        pytest.param([service("s", None)], {}, NONE, id="a Service without a selector"),
        pytest.param(
            [service("s", {})], {}, NONE, id="a Service with an empty selector adds no label"
        ),
        pytest.param(
            [replication_controller("rc", FOO1)],
            {"owners": [owner("ReplicationController", "rc")]},
            SPREAD,
            id="the pod's ReplicationController",
        ),
        pytest.param(
            [replica_set("rs", {"matchLabels": FOO1})],
            {"owners": [owner("ReplicaSet", "rs")]},
            SPREAD,
            id="the pod's ReplicaSet",
        ),
        pytest.param(
            [
                stateful_set(
                    "ss", {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["1"]}]}
                )
            ],
            {"owners": [owner("StatefulSet", "ss")]},
            SPREAD,
            id="the pod's StatefulSet (matchExpressions)",
        ),
        pytest.param(
            [replica_set("rs", {"matchLabels": FOO1})],
            {},
            NONE,
            id="a ReplicaSet that selects the pod but does not own it",
        ),
        pytest.param(
            [replica_set("rs", {"matchLabels": FOO1})],
            {"owners": [owner("ReplicaSet", "rs", controller=False)]},
            NONE,
            id="an owner that is not the pod's controller",
        ),
        pytest.param(
            [replica_set("rs", {"matchLabels": FOO1})],
            {"owners": [owner("ReplicaSet", "rs", api_version="extensions/v1beta1")]},
            NONE,
            id="a controller of another API version",
        ),
        pytest.param(
            [replica_set("rs", {"matchLabels": FOO1}, namespace="other")],
            {"owners": [owner("ReplicaSet", "rs")]},
            NONE,
            id="a ReplicaSet of that name in another namespace",
        ),
        pytest.param(
            [replica_set("rs", {})],
            {"owners": [owner("ReplicaSet", "rs")]},
            NONE,
            id="a ReplicaSet with an empty selector: the default selector is empty",
        ),
        pytest.param(
            [service("s", FOO1), replica_set("rs", {"matchLabels": {"tier": "x"}})],
            {"owners": [owner("ReplicaSet", "rs")], "labels": {"foo": "1", "tier": "x"}},
            # the union foo=1, tier=x selects none of the placed pods: every raw score is 2
            [100, 100, 100, 100],
            id="Service and ReplicaSet selectors are joined",
        ),
    ],
)
def test_what_selects_the_pod(
    selectors: list[Obj], pod_kwargs: dict[str, Any], expected: list[int]
) -> None:
    kwargs = {"labels": FOO1} | pod_kwargs
    labels = kwargs.pop("labels")
    assert scores([*NO_ZONES, *SPREAD_FOO1, *selectors, *incoming(labels, **kwargs)]) == expected


def test_the_filter_ignores_the_default_constraints() -> None:
    ssn = open_session(
        [*NO_ZONES, *placed("a", 9), service("web", FOO), *incoming()],
        policy_text("enqueue, allocate", ["gang", "predicates"]),
    )
    plugin = next(p for p in ssn.plugins if isinstance(p, PredicatesPlugin))
    assert dict(plugin.verdicts(task_of(ssn))).get("PodTopologySpread", []) == []


# -- placements -----------------------------------------------------------------------------------

# three equal nodes, two pods on each, so resources tie and the first name wins unless spreading
# says otherwise: a1 and a2 in zone a, b1 in zone b.
EQUAL = [host("a1", "a", cpu="4"), host("a2", "a", cpu="4"), host("b1", "b", cpu="4")]


def first_bind(objects: Sequence[Obj]) -> str:
    return binds(scenario(objects))["default/p"]


def test_a_pod_selected_by_a_service_goes_to_the_host_with_fewest_of_its_pods() -> None:
    loads = [*placed("a1", 2, FOO), *placed("a2", 2, {"x": "1"}), *placed("b1", 2, FOO)]
    assert first_bind([*EQUAL, *loads, *incoming()]) == "a1"  # nothing selects it: a tie
    assert first_bind([*EQUAL, *loads, service("web", FOO), *incoming()]) == "a2"


def test_a_pod_selected_by_a_service_goes_to_the_zone_with_fewest_of_its_pods() -> None:
    loads = [*placed("a1", 2, {"x": "1"}), *placed("a2", 2, FOO), *placed("b1", 2, {"x": "1"})]
    assert first_bind([*EQUAL, *loads, *incoming()]) == "a1"
    # a1 and b1 both hold none of the Service's pods; zone a holds two
    assert first_bind([*EQUAL, *loads, service("web", FOO), *incoming()]) == "b1"


def test_a_pod_with_its_own_constraints_does_not_get_the_defaults() -> None:
    loads = [*placed("a1", 2, FOO), *placed("a2", 2, {"x": "1"}), *placed("b1", 2, FOO)]
    own = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"nothing": "placed"}},
    }
    objects = [*EQUAL, *loads, service("web", FOO), *incoming(topology_spread_constraints=[own])]
    assert first_bind(objects) == "a1"
