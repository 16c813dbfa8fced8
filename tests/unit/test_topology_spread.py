"""PodTopologySpread: the filter (DoNotSchedule) and the score (ScheduleAnyway), kube 1.36 rules.

Expected verdicts are worked out by hand from kube-scheduler's documented semantics:

- a matching pod is a pod in the incoming pod's namespace that the constraint's labelSelector
  (plus the pod's own values of ``matchLabelKeys``) selects, and is not terminating;
- the eligible nodes have every DoNotSchedule (for the score: ScheduleAnyway) constraint's
  topology key and pass the pod's nodeSelector/required node affinity (``nodeAffinityPolicy``,
  Honor by default) and, with ``nodeTaintsPolicy: Honor`` (Ignore by default), its tolerations;
- filter: a node fails when ``count in its domain (eligible nodes only) + 1 if the pod matches
  its own selector − minimum over the eligible domains > maxSkew``; the minimum is 0 when fewer
  than ``minDomains`` domains are eligible; a node without the key fails with "(missing required
  label)"; a node is rejected for the first constraint it fails;
- score: a candidate lacking a key is ignored (0); raw score is ``Σ count · ln(domains among the
  candidates + 2) + maxSkew − 1``, rounded half away from zero (``kubernetes.io/hostname`` counts
  the candidate's own pods and its domains are the candidates); normalised as
  ``100 · (max + min − raw) // max`` (100 everywhere when max is 0).
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
    pod,
    podgroup,
    policy_text,
    scenario,
    summary,
)
from caldera.api.task import Task
from caldera.framework.session import Session
from caldera.plugins.nodeorder import NodeOrderPlugin, per_row
from caldera.plugins.predicates import PredicatesPlugin
from caldera.plugins.predicates.base import SKIP
from caldera.plugins.predicates.spread import MISSING_LABEL, NOT_MATCH

ZONE = "zone"
HOST = "kubernetes.io/hostname"
APP_A = {"app": "a"}


def spread(
    key: str = ZONE,
    max_skew: int = 1,
    when: str = "DoNotSchedule",
    selector: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A topology spread constraint; the selector defaults to ``app=a``."""
    out: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    out["labelSelector"] = {"matchLabels": APP_A} if selector is None else dict(selector)
    return out | extra


def zone_node(name: str, zone: str | None, **labels: str) -> Obj:
    own = {HOST: name, **labels} | ({ZONE: zone} if zone else {})
    return node(name, cpu="16", labels=own)


def placed(
    on: str,
    count: int = 1,
    labels: Mapping[str, str] = APP_A,
    *,
    namespace: str = "default",
    terminating: bool = False,
) -> list[Obj]:
    """``count`` running pods on node ``on``."""
    out: list[Obj] = []
    for i in range(count):
        p = pod(
            f"{on}-{'-'.join(labels.values())}-{namespace}-{i}",
            namespace=namespace,
            node_name=on,
            scheduler="default-scheduler",
            cpu="100m",
            labels=labels,
        )
        if terminating:
            p = p.model_copy(
                update={"metadata": p.metadata.model_copy(update={"deletion_timestamp": 1.0})}
            )
        out.append(p)
    return out


def incoming(*constraints: Mapping[str, Any], **kwargs: Any) -> list[Obj]:
    kwargs.setdefault("labels", APP_A)
    return [podgroup("pg"), pod("p", group="pg", topology_spread_constraints=constraints, **kwargs)]


def plugin_of(ssn: Session, cls: type[Any]) -> Any:
    return next(p for p in ssn.plugins if isinstance(p, cls))


def task_of(ssn: Session, name: str = "p") -> Task:
    return next(t for t in ssn.jobs["default/pg"].tasks.values() if t.name == name)


PREDICATES = policy_text("enqueue, allocate", ["gang", "predicates"])


def rejected(ssn: Session, task: Task) -> dict[str, list[str]]:
    """reason → nodes the PodTopologySpread filter rejects ``task`` on."""
    plugin: PredicatesPlugin = plugin_of(ssn, PredicatesPlugin)
    rejections = dict(plugin.verdicts(task))["PodTopologySpread"]
    return {r: sorted(ssn.nodes.names[i] for i in np.flatnonzero(m)) for r, m in rejections}


def verdict(objects: Sequence[Obj]) -> dict[str, list[str]]:
    """:func:`rejected` for the pending pod ``p`` of ``objects``."""
    ssn = open_session(objects, PREDICATES)
    return rejected(ssn, task_of(ssn))


# -- filter -------------------------------------------------------------------------------

# zones a (a1, a2), b (b1), c (c1); x1 has no zone label. Every node has its hostname label.
NODES = [
    zone_node("a1", "a"),
    zone_node("a2", "a"),
    zone_node("b1", "b"),
    zone_node("c1", "c"),
    zone_node("x1", None),
]
MISSING = {MISSING_LABEL: ["x1"]}


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            incoming(spread()),
            MISSING,
            id="nothing placed: skew 1 everywhere; a node without the key is rejected",
        ),
        pytest.param(
            [*placed("a1", 2), *placed("b1"), *incoming(spread())],
            {**MISSING, NOT_MATCH: ["a1", "a2", "b1"]},
            id="a: 2+1−0 and b: 1+1−0 exceed maxSkew 1, c: 0+1−0 does not",
        ),
        pytest.param(
            [*placed("a1", 2), *placed("b1"), *incoming(spread(max_skew=2))],
            {**MISSING, NOT_MATCH: ["a1", "a2"]},
            id="maxSkew 2 allows b's skew of 2",
        ),
        pytest.param(
            [*placed("a1"), *placed("a2"), *incoming(spread())],
            {**MISSING, NOT_MATCH: ["a1", "a2"]},
            id="a domain sums the pods of all its nodes",
        ),
        pytest.param(
            [*placed("a1", 2, {"app": "other"}), *incoming(spread())],
            MISSING,
            id="pods the selector does not match do not count",
        ),
        pytest.param(
            [*placed("a1", 2, namespace="elsewhere"), *incoming(spread())],
            MISSING,
            id="pods in another namespace do not count",
        ),
        pytest.param(
            [*placed("a1", 2, terminating=True), *incoming(spread())],
            MISSING,
            id="terminating pods do not count",
        ),
        pytest.param(
            [*placed("a1"), *incoming(spread(), labels={"app": "b"})],
            MISSING,
            id="a pod its own selector does not match adds 0: a is at 1+0−0",
        ),
        pytest.param(
            [*placed("a1"), *incoming(spread())],
            {**MISSING, NOT_MATCH: ["a1", "a2"]},
            id="a pod its own selector matches adds 1: a is at 1+1−0",
        ),
        pytest.param(
            [*placed("a1"), *placed("b1"), *placed("c1"), *incoming(spread())],
            MISSING,
            id="the global minimum is the least-loaded domain: 1+1−1 everywhere",
        ),
        pytest.param(
            [*placed("a1"), *placed("b1"), *placed("c1"), *incoming(spread(minDomains=4))],
            {**MISSING, NOT_MATCH: ["a1", "a2", "b1", "c1"]},
            id="3 eligible domains < minDomains 4: the global minimum counts as 0",
        ),
        pytest.param(
            [*placed("a1"), *placed("b1"), *placed("c1"), *incoming(spread(minDomains=3))],
            MISSING,
            id="minDomains met: the real global minimum",
        ),
        pytest.param(
            [*placed("a1"), *incoming(spread(HOST))],
            {NOT_MATCH: ["a1"]},
            id="kubernetes.io/hostname: every node is its own domain (x1 has the key)",
        ),
        pytest.param(
            [*placed("a1", 3), *incoming(spread(when="ScheduleAnyway"))],
            {},
            id="ScheduleAnyway constraints are not filtered",
        ),
    ],
)
def test_filter(objects: list[Obj], expected: dict[str, list[str]]) -> None:
    assert verdict([*NODES, *objects]) == expected


@pytest.mark.parametrize(
    ("constraint", "pod_labels", "expected"),
    [
        pytest.param(
            spread(),
            {"app": "a", "rev": "2"},
            {**MISSING, NOT_MATCH: ["a1", "a2", "b1"]},
            id="without matchLabelKeys every app=a pod counts (a: 2, b: 1)",
        ),
        pytest.param(
            spread(matchLabelKeys=["rev"]),
            {"app": "a", "rev": "2"},
            {**MISSING, NOT_MATCH: ["b1"]},
            id="matchLabelKeys: only pods with the pod's rev=2 count (a: 0, b: 1)",
        ),
        pytest.param(
            spread(matchLabelKeys=["rev"]),
            {"app": "a"},
            {**MISSING, NOT_MATCH: ["a1", "a2", "b1"]},
            id="a matchLabelKey the pod lacks is ignored",
        ),
        pytest.param(
            spread(selector={}),
            {"app": "a", "rev": "2"},
            MISSING,
            id="an empty labelSelector counts no placed pod in kube 1.36 (self-match: skew 1)",
        ),
        pytest.param(
            spread(selector={}, matchLabelKeys=["rev"]),
            {"app": "a", "rev": "2"},
            {**MISSING, NOT_MATCH: ["b1"]},
            id="an empty labelSelector with a matchLabelKey is no longer empty",
        ),
        pytest.param(
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
            {"app": "a", "rev": "2"},
            MISSING,
            id="no labelSelector matches nothing, not even the pod itself",
        ),
    ],
)
def test_filter_selectors(
    constraint: dict[str, Any], pod_labels: dict[str, str], expected: dict[str, list[str]]
) -> None:
    objects = [
        *placed("a1", 2, {"app": "a", "rev": "1"}),
        *placed("b1", 1, {"app": "a", "rev": "2"}),
        *incoming(constraint, labels=pod_labels),
    ]
    assert verdict([*NODES, *objects]) == expected


NO_SCHEDULE = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
# a1, a2, b1 in pool blue; c1 in pool red and tainted. One app=a pod in zone a and one in b.
POLICY_NODES: list[Obj] = [
    zone_node("a1", "a", pool="blue"),
    zone_node("a2", "a", pool="blue"),
    zone_node("b1", "b", pool="blue"),
    node("c1", cpu="16", labels={HOST: "c1", ZONE: "c", "pool": "red"}, taints=NO_SCHEDULE),
    *placed("a1"),
    *placed("b1"),
]
IN_BLUE = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["blue"]}]}
            ]
        }
    }
}
SKEWED = {NOT_MATCH: ["a1", "a2", "b1"]}


@pytest.mark.parametrize(
    ("constraint", "pod_kwargs", "expected"),
    [
        pytest.param(
            spread(), {}, SKEWED, id="c (0 pods) is eligible: the minimum is 0, a and b at 2"
        ),
        pytest.param(
            spread(),
            {"node_selector": {"pool": "blue"}},
            {},
            id="nodeAffinityPolicy Honor (default): c is not eligible, the minimum is 1",
        ),
        pytest.param(
            spread(),
            {"affinity": IN_BLUE},
            {},
            id="Honor also applies required node-affinity terms",
        ),
        pytest.param(
            spread(nodeAffinityPolicy="Ignore"),
            {"node_selector": {"pool": "blue"}},
            SKEWED,
            id="nodeAffinityPolicy Ignore: c counts again",
        ),
        pytest.param(
            spread(nodeTaintsPolicy="Honor"),
            {},
            {},
            id="nodeTaintsPolicy Honor: c's untolerated taint makes it ineligible",
        ),
        pytest.param(
            spread(nodeTaintsPolicy="Honor"),
            {"tolerations": [{"key": "k", "operator": "Exists"}]},
            SKEWED,
            id="nodeTaintsPolicy Honor with a toleration: c is eligible",
        ),
    ],
)
def test_filter_inclusion_policies(
    constraint: dict[str, Any], pod_kwargs: dict[str, Any], expected: dict[str, list[str]]
) -> None:
    assert verdict([*POLICY_NODES, *incoming(constraint, **pod_kwargs)]) == expected


# Only a1 and b1 have a rack label, so only they have both keys and count; a1 holds 2 pods.
RACK_NODES: list[Obj] = [
    zone_node("a1", "a", rack="r1"),
    zone_node("a2", "a"),
    zone_node("b1", "b", rack="r2"),
    zone_node("c1", "c"),
    zone_node("x1", None),
    *placed("a1", 2),
]


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        pytest.param(
            (ZONE, "rack"),
            {NOT_MATCH: ["a1", "a2"], MISSING_LABEL: ["c1", "x1"]},
            id="zone first: a2 fails zone's skew before its missing rack is looked at",
        ),
        pytest.param(
            ("rack", ZONE),
            {NOT_MATCH: ["a1"], MISSING_LABEL: ["a2", "c1", "x1"]},
            id="rack first: a2 and c1 fail on the missing rack label",
        ),
    ],
)
def test_a_node_is_rejected_for_the_first_constraint_it_fails(
    keys: tuple[str, str], expected: dict[str, list[str]]
) -> None:
    assert verdict([*RACK_NODES, *incoming(*(spread(k) for k in keys))]) == expected


def test_pods_without_hard_constraints_skip_the_filter() -> None:
    ssn = open_session([*NODES, *incoming(spread(when="ScheduleAnyway"))], PREDICATES)
    plugin: PredicatesPlugin = plugin_of(ssn, PredicatesPlugin)
    (f,) = (f for f in plugin.filters if f.name == "PodTopologySpread")
    assert f.pre_filter is not None
    assert f.pre_filter(task_of(ssn)) is SKIP


# -- counts kept current within the session -------------------------------------------------


def test_allocations_and_their_discard_update_the_counts() -> None:
    gang: list[Obj] = [
        podgroup("pg", min_member=2),
        *(pod(n, group="pg", labels=APP_A, topology_spread_constraints=[spread()]) for n in "pq"),
    ]
    ssn = open_session([zone_node("a1", "a"), zone_node("b1", "b"), *gang], PREDICATES)
    p, q = task_of(ssn, "p"), task_of(ssn, "q")
    assert rejected(ssn, q) == {}
    stmt = ssn.statement()
    stmt.allocate(p, ssn.nodes.index["a1"])
    assert rejected(ssn, q) == {NOT_MATCH: ["a1"]}
    stmt.discard()
    assert rejected(ssn, q) == {}


def test_an_evicted_pod_stops_counting_and_counts_again_when_the_eviction_is_undone() -> None:
    running: list[Obj] = [
        podgroup("vg", phase="Running"),
        pod("v", group="vg", node_name="a1", labels=APP_A),
    ]
    ssn = open_session(
        [zone_node("a1", "a"), zone_node("b1", "b"), *running, *incoming(spread())], PREDICATES
    )
    (victim,) = ssn.jobs["default/vg"].tasks.values()
    assert rejected(ssn, task_of(ssn)) == {NOT_MATCH: ["a1"]}
    stmt = ssn.statement()
    stmt.evict(victim, "preempted")
    assert rejected(ssn, task_of(ssn)) == {}
    stmt.discard()
    assert rejected(ssn, task_of(ssn)) == {NOT_MATCH: ["a1"]}


def by_zone(sim_binds: Mapping[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for node_name in sim_binds.values():
        out[node_name[0]] = out.get(node_name[0], 0) + 1
    return out


def test_a_gang_is_spread_evenly_although_resources_favour_one_zone() -> None:
    nodes: list[Obj] = [
        node("a1", cpu="64", labels={ZONE: "a"}),
        node("a2", cpu="64", labels={ZONE: "a"}),
        node("b1", cpu="4", labels={ZONE: "b"}),
        node("b2", cpu="4", labels={ZONE: "b"}),
        node("c1", cpu="4", labels={ZONE: "c"}),
    ]
    gang: list[Obj] = [
        podgroup("pg", min_member=6),
        *(
            pod(f"p{i}", group="pg", labels=APP_A, topology_spread_constraints=[spread()])
            for i in range(6)
        ),
    ]
    sim = scenario([*nodes, *gang])
    assert by_zone(binds(sim)) == {"a": 2, "b": 2, "c": 2}


def test_the_pending_message_counts_spread_failures() -> None:
    sim = scenario(
        [
            node("a1", labels={ZONE: "a"}),
            node("b1", cpu="500m", labels={ZONE: "b"}),
            node("x1"),
            *placed("a1"),
            *incoming(spread()),
        ]
    )
    assert binds(sim) == {}
    head, reasons = summary(sim)["unschedulable"]["default/p"].split(": ", 1)
    assert head.startswith("0/3 nodes are")
    assert reasons == (
        "1 Insufficient cpu, "
        "1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) didn't match pod topology spread constraints (missing required label)."
    )


# -- simulate (preemption) ----------------------------------------------------------------

SIM_OBJECTS: list[Obj] = [
    zone_node("a1", "a"),
    zone_node("b1", "b"),
    zone_node("c1", "c"),
    zone_node("x1", None),
    *placed("a1", 2),
    *placed("a1", 1, {"app": "other"}),
    *incoming(spread()),
    pod("extra", group="pg", labels=APP_A),
]


@pytest.mark.parametrize(
    ("on", "removed", "added", "expected"),
    [
        pytest.param("a1", [], [], [NOT_MATCH], id="no change: a at 2+1−0"),
        pytest.param(
            "a1", ["a1-a-default-0"], [], [NOT_MATCH], id="one of two matching pods removed"
        ),
        pytest.param(
            "a1", ["a1-a-default-0", "a1-a-default-1"], [], [], id="both removed: a at 0+1−0"
        ),
        pytest.param(
            "a1", ["a1-other-default-0"], [], [NOT_MATCH], id="removing a non-matching pod"
        ),
        pytest.param("b1", [], [], [], id="b at 0+1−0"),
        pytest.param("b1", [], ["extra"], [NOT_MATCH], id="a matching pod added on b1"),
        pytest.param("x1", [], [], [MISSING_LABEL], id="a node without the key"),
    ],
)
def test_simulate(on: str, removed: list[str], added: list[str], expected: list[str]) -> None:
    ssn = open_session(SIM_OBJECTS, PREDICATES)
    tasks = {t.name: t for on_node in ssn.nodes.tasks for t in on_node.values()}
    tasks["extra"] = task_of(ssn, "extra")
    row = ssn.nodes.index[on]
    changes = [tasks[n] for n in removed], [tasks[n] for n in added]
    assert ssn.simulate_predicate(task_of(ssn), row, *changes) == expected


# -- score --------------------------------------------------------------------------------

NODEORDER = policy_text("enqueue, allocate", ["gang", "predicates", "nodeorder"])
SOFT = "ScheduleAnyway"
# zones a (a1, a2), b (b1), c (c1); x1 has no zone. a2 is in pool red, the others in blue.
SCORE_NODES: list[Obj] = [
    zone_node("a1", "a", pool="blue"),
    zone_node("a2", "a", pool="red"),
    zone_node("b1", "b", pool="blue"),
    zone_node("c1", "c", pool="blue"),
    zone_node("x1", None, pool="blue"),
]
ALL = ["a1", "b1", "c1", "x1"]


def scores(objects: Sequence[Obj], candidates: Sequence[str]) -> list[float]:
    ssn = open_session([*SCORE_NODES, *objects], NODEORDER)
    plugin: NodeOrderPlugin = plugin_of(ssn, NodeOrderPlugin)
    (scorer,) = (s for s in plugin.scorers if s.name == "podtopologyspread")
    idx = np.array([ssn.nodes.index[n] for n in candidates], dtype=np.intp)
    result: list[float] = per_row(scorer.fn(task_of(ssn), idx), len(idx)).tolist()
    return result


@pytest.mark.parametrize(
    ("objects", "candidates", "expected"),
    [
        pytest.param(
            incoming(spread(when=SOFT)),
            ALL,
            [100, 100, 100, 0],
            id="no pods placed: max raw 0 scores 100; x1 lacks the key and scores 0",
        ),
        pytest.param(
            [*placed("a1", 2), *placed("b1"), *incoming(spread(when=SOFT))],
            ALL,
            # weight ln(3 + 2): raw a 2·1.609 = 3.22 → 3, b 1.61 → 2 (rounded, not truncated),
            # c 0; 100·(3 + 0 − raw) // 3
            [0, 33, 100, 0],
            id="fewer matching pods in the domain score higher",
        ),
        pytest.param(
            [*placed("a1", 2), *placed("b1"), *incoming(spread(when=SOFT, max_skew=3))],
            ALL,
            # + maxSkew − 1 = 2: a 5.22 → 5, b 3.61 → 4, c 2; 100·(5 + 2 − raw) // 5
            [40, 60, 100, 0],
            id="maxSkew − 1 is added to every raw score",
        ),
        pytest.param(
            [*placed("a1"), *placed("a2"), *placed("b1"), *incoming(spread(when=SOFT))],
            ["a1", "b1", "c1"],
            [0, 33, 100],
            id="a domain counts its pods on every node, candidate or not (a2 is not)",
        ),
        pytest.param(
            [*placed("a1", 2), *placed("b1"), *incoming(spread(when=SOFT))],
            ["a1", "b1"],
            # two domains among the candidates: weight ln 4; a 2.77 → 3, b 1.39 → 1;
            # 100·(3 + 1 − raw) // 3
            [33, 100],
            id="the weight and the minimum come from the candidates' domains only",
        ),
        pytest.param(
            [*placed("a1", 2), *placed("a2", 5), *placed("b1"), *incoming(spread(HOST, when=SOFT))],
            ALL,
            # 4 candidates with the key: weight ln 6; a1 3.58 → 4, b1 1.79 → 2; a2's pods are
            # not a1's; 100·(4 + 0 − raw) // 4
            [0, 50, 100, 100],
            id="kubernetes.io/hostname counts the node's own pods; x1 has that key",
        ),
        pytest.param(
            [
                *placed("a1", 2),
                *placed("b1"),
                *incoming(spread(when=SOFT), spread(HOST, when=SOFT, max_skew=2)),
            ],
            ALL,
            # both weights ln 5 (x1 is ignored); a1 3.22 + 3.22 + 1 = 7.44 → 7,
            # b1 1.61 + 1.61 + 1 = 4.22 → 4, c1 1; 100·(7 + 1 − raw) // 7
            [14, 57, 100, 0],
            id="constraints add up; a node missing one key is ignored for all",
        ),
        pytest.param(
            [
                *placed("a2", 2),
                *placed("b1"),
                *incoming(spread(when=SOFT), node_selector={"pool": "blue"}),
            ],
            ["a1", "b1", "c1"],
            # a2 (red) does not count under nodeAffinityPolicy Honor: a 0, b 1.61 → 2, c 0
            [100, 0, 100],
            id="nodeAffinityPolicy Honor: pods on nodes the pod cannot use do not count",
        ),
        pytest.param(
            [
                *placed("a2", 2),
                *placed("b1"),
                *incoming(
                    spread(when=SOFT, nodeAffinityPolicy="Ignore"), node_selector={"pool": "blue"}
                ),
            ],
            ["a1", "b1", "c1"],
            [0, 33, 100],
            id="nodeAffinityPolicy Ignore: they count",
        ),
        pytest.param(
            [*placed("a1", 2), *incoming(spread())],
            ALL,
            [0, 0, 0, 0],
            id="DoNotSchedule constraints are not scored",
        ),
    ],
)
def test_score(objects: list[Obj], candidates: list[str], expected: list[int]) -> None:
    assert scores(objects, candidates) == expected


def test_soft_spreading_places_each_pod_in_the_emptiest_zone() -> None:
    """Resources favour the big node a1 by far; the spread score (weight 2) sends each pod of
    the gang to a zone without one, which needs the counts updated after every placement."""
    nodes: list[Obj] = [
        node("a1", cpu="64", memory="64Gi", labels={ZONE: "a"}),
        node("b1", cpu="4", labels={ZONE: "b"}),
        node("c1", cpu="4", labels={ZONE: "c"}),
    ]
    gang: list[Obj] = [
        podgroup("pg", min_member=3),
        *(
            pod(f"p{i}", group="pg", labels=APP_A, topology_spread_constraints=[spread(when=SOFT)])
            for i in range(3)
        ),
    ]
    assert by_zone(binds(scenario([*nodes, *gang]))) == {"a": 1, "b": 1, "c": 1}
    plain: list[Obj] = [podgroup("pg", min_member=3), *(pod(f"p{i}", group="pg") for i in range(3))]
    assert by_zone(binds(scenario([*nodes, *plain]))) == {"a": 3}
