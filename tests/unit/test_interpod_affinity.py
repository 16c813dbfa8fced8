"""InterPodAffinity: the filter (required pod affinity, anti-affinity, existing pods' anti-affinity)
and the score (``podaffinity.weight``), with kube-scheduler's semantics.

Expected verdicts follow kube-scheduler's InterPodAffinity plugin:

- a term selects placed pods by ``labelSelector`` (missing: none) in its namespaces (the
  ``namespaces`` list plus the namespaces ``namespaceSelector`` matches, ``{}`` meaning all; the
  owning pod's namespace when both are absent); ``matchLabelKeys``/``mismatchLabelKeys`` add
  ``In``/``NotIn`` requirements with the owning pod's label values;
- affinity: the node needs every term's topology label, and in each term's domain a placed pod
  matching *all* terms, unless no such pod exists anywhere and the pod matches its own terms;
- anti-affinity: no placed pod matching a term in the node's domain of that term's key;
- existing anti-affinity: no placed pod in the node's domain owning a required anti-affinity term
  that matches the incoming pod;
- one reason per node, the first failing check in that order;
- score: ±weight per matching placed pod per domain (existing pods' required affinity counts 1),
  normalised over the candidates as ``trunc(100 · (s − min) / (max − min))``, 0 when all equal.

The cluster: n1 and n2 in zone a, n3 in zone b, n4 without a zone label; every node has its
``kubernetes.io/hostname`` label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from builders import (
    Obj,
    binds,
    new_session,
    node,
    open_session,
    pod,
    podgroup,
    policy_text,
    scenario,
    task_named,
)
from caldera.api.task import Task
from caldera.framework.session import Session
from caldera.plugins.nodeorder import NamedScorer, NodeOrderPlugin, per_row
from caldera.plugins.nodeorder.interpod import normalize, pod_affinity_scorer
from caldera.plugins.predicates import PredicatesPlugin
from caldera.plugins.predicates.base import SKIP, NodeFilter

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
HOST = "kubernetes.io/hostname"
NODES = ["n1", "n2", "n3", "n4"]
ZONES = {"n1": "a", "n2": "a", "n3": "b"}

FILTER_POLICY = policy_text("enqueue, allocate", ["gang", "predicates"])
SCORE_POLICY = policy_text(
    "enqueue, allocate",
    ["gang", "nodeorder"],
    arguments={
        "nodeorder": {
            "leastrequested.weight": 0,
            "balancedresource.weight": 0,
            "nodeaffinity.weight": 0,
            "imagelocality.weight": 0,
            "tainttoleration.weight": 0,
            "podaffinity.weight": 1,
        }
    },
)


def cluster() -> list[Obj]:
    return [node(n, labels={HOST: n, **({"zone": ZONES[n]} if n in ZONES else {})}) for n in NODES]


def term(
    labels: Mapping[str, str] | None = None,
    key: str = "zone",
    *,
    namespaces: Sequence[str] = (),
    ns_selector: Mapping[str, str] | None = None,
    match_keys: Sequence[str] = (),
    mismatch_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """A PodAffinityTerm; ``labels=None`` leaves the labelSelector out."""
    out: dict[str, Any] = {"topologyKey": key}
    if labels is not None:
        out["labelSelector"] = {"matchLabels": dict(labels)}
    if namespaces:
        out["namespaces"] = list(namespaces)
    if ns_selector is not None:
        out["namespaceSelector"] = {"matchLabels": dict(ns_selector)} if ns_selector else {}
    if match_keys:
        out["matchLabelKeys"] = list(match_keys)
    if mismatch_keys:
        out["mismatchLabelKeys"] = list(mismatch_keys)
    return out


def affinity(
    required: Sequence[dict[str, Any]] = (),
    anti: Sequence[dict[str, Any]] = (),
    preferred: Sequence[tuple[int, dict[str, Any]]] = (),
    preferred_anti: Sequence[tuple[int, dict[str, Any]]] = (),
) -> dict[str, Any]:
    def block(req: Sequence[Any], pref: Sequence[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
        return {
            "requiredDuringSchedulingIgnoredDuringExecution": list(req),
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": t} for w, t in pref
            ],
        }

    return {
        "podAffinity": block(required, preferred),
        "podAntiAffinity": block(anti, preferred_anti),
    }


def placed(
    name: str,
    on: str,
    labels: Mapping[str, str],
    *,
    namespace: str = "default",
    aff: dict[str, Any] | None = None,
) -> Obj:
    """A pod of another scheduler already running on node ``on``."""
    return pod(
        name,
        namespace=namespace,
        node_name=on,
        scheduler="default-scheduler",
        labels=labels,
        affinity=aff,
    )


def session(
    existing: Sequence[Obj],
    policy_yaml: str = FILTER_POLICY,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    **pod_kwargs: Any,
) -> tuple[Session, Task]:
    """An open session with ``existing`` pods placed and one pending pod ``p`` of ``pod_kwargs``;
    ``namespaces`` sets namespace labels (for namespaceSelector)."""
    ssn = new_session(
        [*cluster(), *existing, podgroup("pg"), pod("p", group="pg", **pod_kwargs)], policy_yaml
    )
    for ns, labels in (namespaces or {}).items():
        ssn.snapshot.namespace_labels[ns] = dict(labels)
    ssn.open()
    return ssn, next(iter(ssn.jobs["default/pg"].tasks.values()))


def verdicts(ssn: Session, task: Task) -> dict[str, list[str]]:
    """reason → the nodes rejected for it (no entry: every node fits)."""
    out: dict[str, list[str]] = {}
    for reason, mask in ssn.predicate(task):
        out.setdefault(reason, []).extend(ssn.nodes.names[i] for i in np.flatnonzero(mask))
    return {k: sorted(v) for k, v in out.items()}


def running(ssn: Session, name: str) -> Task:
    """The placed pod ``name``."""
    return next(t for tasks in ssn.nodes.tasks for t in tasks.values() if t.name == name)


def filter_of(ssn: Session) -> NodeFilter:
    plugin = next(p for p in ssn.plugins if isinstance(p, PredicatesPlugin))
    return next(f for f in plugin.filters if f.name == "InterPodAffinity")


DB_ON_N1 = placed("db", "n1", {"app": "db"})
DB_ON_N3 = placed("db3", "n3", {"app": "db"})


# -- the filter -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "pod_kwargs", "namespaces", "expected"),
    [
        pytest.param(
            [DB_ON_N1],
            {"affinity": affinity([term({"app": "db"})])},
            None,
            {AFFINITY: ["n3", "n4"]},
            id="affinity: the zone of a matching pod fits; a node without the zone label fails",
        ),
        pytest.param(
            [DB_ON_N1],
            {"affinity": affinity([term({"app": "db"}, HOST)])},
            None,
            {AFFINITY: ["n2", "n3", "n4"]},
            id="affinity on hostname: only the matching pod's node",
        ),
        pytest.param(
            [DB_ON_N1, DB_ON_N3],
            {"affinity": affinity([term({"app": "db"})])},
            None,
            {AFFINITY: ["n4"]},
            id="affinity: every zone with a matching pod fits",
        ),
        pytest.param(
            [],
            {"affinity": affinity([term({"app": "db"})])},
            None,
            {AFFINITY: NODES},
            id="affinity: no matching pod anywhere and the pod does not match itself",
        ),
        pytest.param(
            [],
            {"labels": {"app": "db"}, "affinity": affinity([term({"app": "db"})])},
            None,
            {AFFINITY: ["n4"]},
            id="first pod of a group: it matches its own term, so every labelled node fits",
        ),
        pytest.param(
            [DB_ON_N3],
            {"labels": {"app": "db"}, "affinity": affinity([term({"app": "db"})])},
            None,
            {AFFINITY: ["n1", "n2", "n4"]},
            id="first-pod rule is off once a matching pod exists somewhere",
        ),
        pytest.param(
            [placed("db", "n1", {"app": "db"}), placed("web", "n2", {"tier": "web"})],
            {"affinity": affinity([term({"app": "db"}), term({"tier": "web"})])},
            None,
            {AFFINITY: NODES},
            id="affinity: one pod must match all terms (two pods matching one each do not count)",
        ),
        pytest.param(
            [placed("both", "n3", {"app": "db", "tier": "web"})],
            {"affinity": affinity([term({"app": "db"}), term({"tier": "web"}, HOST)])},
            None,
            {AFFINITY: ["n1", "n2", "n4"]},
            id="affinity: each term in its own topology; zone b and host n3 meet at n3",
        ),
        pytest.param(
            [],
            {"labels": {"app": "db"}, "affinity": affinity([term(None)])},
            None,
            {AFFINITY: NODES},
            id="a term without labelSelector matches no pod, not even the pod itself",
        ),
        pytest.param(
            [placed("db", "n1", {"app": "db"}, namespace="other")],
            {"affinity": affinity([term({"app": "db"})])},
            None,
            {AFFINITY: NODES},
            id="namespaces default to the pod's own: a match in another namespace does not count",
        ),
        pytest.param(
            [placed("db", "n1", {"app": "db"}, namespace="other")],
            {"affinity": affinity([term({"app": "db"}, namespaces=["other"])])},
            None,
            {AFFINITY: ["n3", "n4"]},
            id="namespaces list",
        ),
        pytest.param(
            [placed("db", "n1", {"app": "db"}, namespace="other")],
            {"affinity": affinity([term({"app": "db"}, ns_selector={})])},
            None,
            {AFFINITY: ["n3", "n4"]},
            id="empty namespaceSelector means every namespace",
        ),
        pytest.param(
            [
                placed("db", "n1", {"app": "db"}, namespace="team-a"),
                placed("db3", "n3", {"app": "db"}, namespace="team-b"),
            ],
            {"affinity": affinity([term({"app": "db"}, ns_selector={"team": "a"})])},
            {"team-a": {"team": "a"}, "team-b": {"team": "b"}},
            {AFFINITY: ["n3", "n4"]},
            id="namespaceSelector matches namespace labels",
        ),
        pytest.param(
            [
                placed("v1", "n1", {"tier": "cache", "version": "v1"}),
                placed("v2", "n3", {"tier": "cache", "version": "v2"}),
            ],
            {
                "labels": {"version": "v2"},
                "affinity": affinity([term({"tier": "cache"}, match_keys=["version"])]),
            },
            None,
            {AFFINITY: ["n1", "n2", "n4"]},
            id="matchLabelKeys: only pods with the pod's own value for the key",
        ),
        pytest.param(
            [
                placed("v1", "n1", {"tier": "cache", "version": "v1"}),
                placed("v2", "n3", {"tier": "cache", "version": "v2"}),
            ],
            {
                "labels": {"version": "v2"},
                "affinity": affinity([term({"tier": "cache"}, mismatch_keys=["version"])]),
            },
            None,
            {AFFINITY: ["n3", "n4"]},
            id="mismatchLabelKeys: only pods with another value for the key",
        ),
        pytest.param(
            [placed("v1", "n1", {"tier": "cache", "version": "v1"})],
            {"affinity": affinity([term({"tier": "cache"}, match_keys=["version"])])},
            None,
            {AFFINITY: ["n3", "n4"]},
            id="matchLabelKeys: a key the pod does not have is ignored",
        ),
        pytest.param(
            [DB_ON_N1],
            {"affinity": affinity(anti=[term({"app": "db"})])},
            None,
            {ANTI: ["n1", "n2"]},
            id="anti-affinity: the whole zone of a matching pod fails; no zone label fits",
        ),
        pytest.param(
            [DB_ON_N1],
            {"affinity": affinity(anti=[term({"app": "db"}, HOST)])},
            None,
            {ANTI: ["n1"]},
            id="anti-affinity on hostname: only that node",
        ),
        pytest.param(
            [DB_ON_N1, placed("web", "n3", {"tier": "web"})],
            {"affinity": affinity(anti=[term({"app": "db"}), term({"tier": "web"}, HOST)])},
            None,
            {ANTI: ["n1", "n2", "n3"]},
            id="anti-affinity: each term on its own",
        ),
        pytest.param(
            [placed("db", "n1", {"app": "db"}, namespace="other")],
            {"affinity": affinity(anti=[term({"app": "db"})])},
            None,
            {},
            id="anti-affinity: a pod in another namespace does not count",
        ),
        pytest.param(
            [placed("guard", "n1", {"app": "x"}, aff=affinity(anti=[term({"app": "web"})]))],
            {"labels": {"app": "web"}},
            None,
            {EXISTING: ["n1", "n2"]},
            id="existing pod's anti-affinity: its zone rejects a pod it matches",
        ),
        pytest.param(
            [placed("guard", "n1", {"app": "x"}, aff=affinity(anti=[term({"app": "web"}, HOST)]))],
            {"labels": {"app": "web"}},
            None,
            {EXISTING: ["n1"]},
            id="existing pod's anti-affinity in its own topology (hostname)",
        ),
        pytest.param(
            [placed("guard", "n1", {"app": "x"}, aff=affinity(anti=[term({"app": "web"})]))],
            {"labels": {"app": "api"}},
            None,
            {},
            id="existing pod's anti-affinity that does not match the pod",
        ),
        pytest.param(
            [
                placed(
                    "guard",
                    "n1",
                    {"app": "x"},
                    namespace="other",
                    aff=affinity(anti=[term({"app": "web"})]),
                )
            ],
            {"labels": {"app": "web"}},
            None,
            {},
            id="existing pod's term defaults to its own namespace, not the incoming pod's",
        ),
        pytest.param(
            [
                placed(
                    "guard",
                    "n1",
                    {"app": "x"},
                    namespace="other",
                    aff=affinity(anti=[term({"app": "web"}, ns_selector={"env": "prod"})]),
                )
            ],
            {"labels": {"app": "web"}},
            {"default": {"env": "prod"}},
            {EXISTING: ["n1", "n2"]},
            id="existing pod's namespaceSelector is matched against the incoming pod's namespace",
        ),
        pytest.param(
            [
                placed(
                    "guard",
                    "n1",
                    {"app": "x", "tenant": "t1"},
                    aff=affinity(anti=[term({"app": "web"}, match_keys=["tenant"])]),
                )
            ],
            {"labels": {"app": "web", "tenant": "t2"}},
            None,
            {},
            id="existing pod's matchLabelKeys take the existing pod's values",
        ),
        pytest.param(
            [placed("db", "n3", {"app": "db"}), placed("web", "n1", {"tier": "web"})],
            {"affinity": affinity([term({"app": "db"}, HOST)], anti=[term({"tier": "web"}, HOST)])},
            None,
            {AFFINITY: ["n1", "n2", "n4"]},
            id="one reason per node: affinity is reported before anti-affinity",
        ),
        pytest.param(
            [
                placed("web", "n1", {"tier": "web"}),
                placed("guard", "n2", {"app": "x"}, aff=affinity(anti=[term({"app": "p"}, HOST)])),
            ],
            {"labels": {"app": "p"}, "affinity": affinity(anti=[term({"tier": "web"})])},
            None,
            {ANTI: ["n1", "n2"]},
            id="one reason per node: anti-affinity before existing pods' anti-affinity",
        ),
    ],
)
def test_filter(
    existing: list[Obj],
    pod_kwargs: dict[str, Any],
    namespaces: dict[str, dict[str, str]] | None,
    expected: dict[str, list[str]],
) -> None:
    ssn, task = session(existing, namespaces=namespaces, **pod_kwargs)
    assert verdicts(ssn, task) == expected


@pytest.mark.parametrize(
    ("existing", "pod_kwargs", "skip"),
    [
        pytest.param([DB_ON_N1], {}, True, id="no terms and no existing anti-affinity: skip"),
        pytest.param(
            [placed("guard", "n1", {"app": "x"}, aff=affinity(anti=[term({"app": "web"})]))],
            {"labels": {"app": "api"}},
            True,
            id="an existing anti-affinity term that does not match the pod: skip (kube)",
        ),
        pytest.param(
            [placed("guard", "n1", {"app": "x"}, aff=affinity(anti=[term({"app": "web"})]))],
            {"labels": {"app": "web"}},
            False,
            id="an existing anti-affinity term that matches the pod: check",
        ),
        pytest.param(
            [], {"affinity": affinity([term({"app": "db"})])}, False, id="required affinity: check"
        ),
        pytest.param(
            [], {"affinity": affinity(anti=[term({"app": "db"})])}, False, id="anti: check"
        ),
        pytest.param(
            [],
            {"affinity": affinity(preferred=[(5, term({"app": "db"}))])},
            True,
            id="preferred terms only: skip (they are scored, not filtered)",
        ),
    ],
)
def test_pre_filter_skip(existing: list[Obj], pod_kwargs: dict[str, Any], skip: bool) -> None:
    ssn, task = session(existing, **pod_kwargs)
    pre_filter = filter_of(ssn).pre_filter
    assert pre_filter is not None
    assert (pre_filter(task) is SKIP) is skip


def test_switch_turns_the_filter_off() -> None:
    policy_yaml = policy_text(
        "enqueue, allocate",
        ["gang", "predicates"],
        arguments={"predicates": {"predicate.PodAffinityEnable": False}},
    )
    ssn, task = session([DB_ON_N1], policy_yaml, affinity=affinity(anti=[term({"app": "db"})]))
    assert verdicts(ssn, task) == {}


# -- counts follow the session's placements -----------------------------------------------------


def db_and_two_pods_naming_it(*, anti: bool, db_on: str = "") -> tuple[Session, Task, Task, Task]:
    """An open session with pod db (app=db), running on ``db_on`` or else pending, and two
    pending pods whose required affinity (or anti-affinity) names it: p by zone, p2 by host.
    Returns the session and the tasks of db, p and p2."""

    def naming_db(key: str) -> dict[str, Any]:
        rule = [term({"app": "db"}, key)]
        return affinity(anti=rule) if anti else affinity(rule)

    ssn = open_session(
        [
            *cluster(),
            podgroup("pgdb", phase="Running" if db_on else "Pending"),
            pod("db", group="pgdb", node_name=db_on, labels={"app": "db"}),
            podgroup("pg"),
            pod("p", group="pg", affinity=naming_db("zone")),
            podgroup("pg2"),
            pod("p2", group="pg2", affinity=naming_db(HOST)),
        ],
        FILTER_POLICY,
    )
    return ssn, task_named(ssn, "db"), task_named(ssn, "p"), task_named(ssn, "p2")


def test_counts_follow_allocate_and_discard() -> None:
    ssn, db, task, later = db_and_two_pods_naming_it(anti=False)
    assert verdicts(ssn, task) == {AFFINITY: NODES}
    stmt = ssn.statement()
    stmt.allocate(db, ssn.nodes.index["n3"])
    assert verdicts(ssn, task) == {AFFINITY: ["n1", "n2", "n4"]}
    assert verdicts(ssn, later) == {AFFINITY: ["n1", "n2", "n4"]}, "first asked after it"
    stmt.discard()
    assert verdicts(ssn, task) == {AFFINITY: NODES}
    assert verdicts(ssn, later) == {AFFINITY: NODES}


@pytest.mark.parametrize(
    "asked_before",
    [
        pytest.param(True, id="counts built before the eviction"),
        pytest.param(False, id="counts first built after the eviction"),
    ],
)
def test_an_evicted_pod_no_longer_counts(asked_before: bool) -> None:
    """Volcano removes a pod from its plugins' node info on the deallocate event of an eviction,
    though the pod stays on its node (releasing) until it is gone."""
    ssn, db, task, later = db_and_two_pods_naming_it(anti=True, db_on="n1")
    if asked_before:
        assert verdicts(ssn, task) == {ANTI: ["n1", "n2"]}
    stmt = ssn.statement()
    stmt.evict(db, "preempted")
    assert verdicts(ssn, task) == {}
    assert verdicts(ssn, later) == {}
    stmt.discard()
    assert verdicts(ssn, task) == {ANTI: ["n1", "n2"]}
    assert verdicts(ssn, later) == {ANTI: ["n1"]}


def test_simulate_sees_victims_removed_and_pods_added_without_changing_state() -> None:
    guard = placed("guard", "n3", {"app": "x"}, aff=affinity(anti=[term({"app": "p"}, HOST)]))
    ssn, task = session(
        [DB_ON_N1, guard],
        labels={"app": "p"},
        affinity=affinity(anti=[term({"app": "db"})]),
    )
    row = ssn.nodes.index
    db, guard_task = running(ssn, "db"), running(ssn, "guard")
    before = verdicts(ssn, task)
    assert before == {ANTI: ["n1", "n2"], EXISTING: ["n3"]}
    assert ssn.simulate_predicate(task, row["n2"]) == [ANTI]
    assert ssn.simulate_predicate(task, row["n2"], removed=[db]) == []
    assert ssn.simulate_predicate(task, row["n3"], removed=[guard_task]) == []
    assert ssn.simulate_predicate(task, row["n4"]) == []
    assert ssn.simulate_predicate(task, row["n4"], added=[guard_task]) == [EXISTING]
    assert ssn.simulate_predicate(task, row["n3"], removed=[guard_task], added=[db]) == [ANTI]
    assert verdicts(ssn, task) == before


def test_simulate_affinity_counts_the_whole_cluster() -> None:
    ssn, task = session([DB_ON_N1], affinity=affinity([term({"app": "db"})]))
    row = ssn.nodes.index
    db = running(ssn, "db")
    assert ssn.simulate_predicate(task, row["n2"]) == []
    assert ssn.simulate_predicate(task, row["n2"], removed=[db]) == [AFFINITY]
    assert ssn.simulate_predicate(task, row["n3"]) == [AFFINITY]
    assert ssn.simulate_predicate(task, row["n3"], added=[db]) == []


# -- the score ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param([-3, 0, 2], [0, 60, 100], id="min maps to 0, max to 100"),
        pytest.param([0, 1, 2, 3], [0, 33, 66, 100], id="truncated, not rounded"),
        pytest.param([5, 5, 5], [0, 0, 0], id="all equal: every node 0"),
        pytest.param([-4, -4], [0, 0], id="all equal and negative: 0"),
        pytest.param([7], [0], id="one candidate: 0"),
        pytest.param([], [], id="no candidates"),
    ],
)
def test_normalize(raw: list[int], expected: list[int]) -> None:
    assert normalize(np.array(raw, dtype=np.float64)).tolist() == expected


@pytest.mark.parametrize(
    ("existing", "pod_kwargs", "expected"),
    [
        pytest.param(
            [DB_ON_N1],
            {"affinity": affinity(preferred=[(10, term({"app": "db"}))])},
            [100, 100, 0, 0],
            id="preferred affinity: +weight across the matching pod's zone",
        ),
        pytest.param(
            [DB_ON_N1],
            {"affinity": affinity(preferred_anti=[(10, term({"app": "db"}))])},
            [0, 0, 100, 100],
            id="preferred anti-affinity: -weight across the matching pod's zone",
        ),
        pytest.param(
            [DB_ON_N1, placed("cache", "n3", {"app": "cache"})],
            {
                "affinity": affinity(
                    preferred=[(5, term({"app": "db"}, HOST))],
                    preferred_anti=[(10, term({"app": "cache"}))],
                )
            },
            # raw 5, 0, -10, 0: (s + 10) · 100 // 15
            [100, 66, 0, 66],
            id="affinity and anti-affinity add up, then min-max normalised",
        ),
        pytest.param(
            [
                placed("db", "n1", {"app": "db"}),
                placed("db2", "n2", {"app": "db"}),
                placed("db3", "n3", {"app": "db"}),
            ],
            {"affinity": affinity(preferred=[(3, term({"app": "db"}))])},
            # zone a holds two matching pods (6), zone b one (3), n4 none
            [100, 100, 50, 0],
            id="every matching pod counts",
        ),
        pytest.param(
            [placed("db", "n1", {"app": "db"}, namespace="other")],
            {"affinity": affinity(preferred=[(10, term({"app": "db"}))])},
            [0, 0, 0, 0],
            id="a pod in another namespace does not count",
        ),
        pytest.param(
            [placed("x", "n3", {"app": "x"}, aff=affinity([term({"app": "web"})]))],
            {"labels": {"app": "web"}},
            [0, 0, 0, 0],
            id="existing pod's required affinity does not score: Volcano's weight is 0",
        ),
        pytest.param(
            [placed("x", "n3", {"app": "x"}, aff=affinity(preferred=[(7, term({"app": "web"}))]))],
            {"labels": {"app": "web"}},
            [0, 0, 100, 0],
            id="existing pod's preferred affinity matching the pod",
        ),
        pytest.param(
            [
                placed(
                    "x",
                    "n3",
                    {"app": "x"},
                    aff=affinity(preferred_anti=[(7, term({"app": "web"}))]),
                )
            ],
            {"labels": {"app": "web"}},
            [100, 100, 0, 100],
            id="existing pod's preferred anti-affinity matching the pod",
        ),
        pytest.param(
            [
                placed("x", "n3", {"app": "x"}, aff=affinity([term({"app": "web"})])),
                placed(
                    "y", "n1", {"app": "y"}, aff=affinity(preferred=[(2, term({"app": "web"}))])
                ),
            ],
            {"labels": {"app": "web"}},
            # raw 2, 2, 0, 0 (x's required term has weight 0, as in Volcano)
            [100, 100, 0, 0],
            id="existing pods' terms add up per domain",
        ),
        pytest.param(
            [placed("x", "n3", {"app": "x"}, aff=affinity([term({"app": "web"})]))],
            {"labels": {"app": "api"}},
            [0, 0, 0, 0],
            id="existing pod's term that does not match the pod",
        ),
        pytest.param(
            [DB_ON_N1],
            {"affinity": affinity(preferred=[(10, term({"app": "cache"}))])},
            [0, 0, 0, 0],
            id="nothing matches: every node 0",
        ),
    ],
)
def test_score(existing: list[Obj], pod_kwargs: dict[str, Any], expected: list[int]) -> None:
    ssn, task = session(existing, SCORE_POLICY, **pod_kwargs)
    scores = ssn.node_order(task, np.arange(len(ssn.nodes), dtype=np.intp))
    assert scores.tolist() == expected


def test_kubes_hard_pod_affinity_weight_is_one_argument_away() -> None:
    existing = [
        placed("x", "n3", {"app": "x"}, aff=affinity([term({"app": "web"})])),
        placed("y", "n1", {"app": "y"}, aff=affinity(preferred=[(2, term({"app": "web"}))])),
    ]
    ssn, task = session(existing, SCORE_POLICY, labels={"app": "web"})
    rows = np.arange(len(ssn.nodes), dtype=np.intp)
    # raw 2, 2, 1, 0 with kube's default hardPodAffinityWeight of 1
    scores = per_row(pod_affinity_scorer(ssn, hard_weight=1)(task, rows), len(rows))
    assert scores.tolist() == [100, 100, 50, 0]


def podaffinity_scorer(ssn: Session) -> NamedScorer:
    plugin = next(p for p in ssn.plugins if isinstance(p, NodeOrderPlugin))
    return next(s for s in plugin.scorers if s.name == "podaffinity")


def test_score_is_normalised_over_the_candidates_only() -> None:
    existing = [DB_ON_N1, placed("cache", "n3", {"app": "cache"})]
    ssn, task = session(
        existing,
        SCORE_POLICY,
        affinity=affinity(
            preferred=[(5, term({"app": "db"}))], preferred_anti=[(5, term({"app": "cache"}))]
        ),
    )
    fn = podaffinity_scorer(ssn).fn
    row = ssn.nodes.index
    # all nodes: raw 5, 5, -5, 0 → 100, 100, 0, 50; without n3: raw 5, 5, 0 → 100, 100, 0
    every = np.array([row[n] for n in NODES], dtype=np.intp)
    assert per_row(fn(task, every), 4).tolist() == [100, 100, 0, 50]
    some = np.array([row["n1"], row["n4"]], dtype=np.intp)
    assert per_row(fn(task, some), 2).tolist() == [100, 0]


def test_score_follows_allocations() -> None:
    ssn = open_session(
        [
            *cluster(),
            podgroup("pgdb"),
            pod("db", group="pgdb", labels={"app": "db"}),
            podgroup("pg"),
            pod("p", group="pg", affinity=affinity(preferred=[(10, term({"app": "db"}))])),
        ],
        SCORE_POLICY,
    )
    db = next(iter(ssn.jobs["default/pgdb"].tasks.values()))
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    every = np.arange(len(ssn.nodes), dtype=np.intp)
    assert ssn.node_order(task, every).tolist() == [0, 0, 0, 0]
    stmt = ssn.statement()
    stmt.allocate(db, ssn.nodes.index["n3"])
    assert ssn.node_order(task, every).tolist() == [0, 0, 100, 0]
    stmt.discard()
    assert ssn.node_order(task, every).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("weight", "expected"),
    [
        pytest.param(2, [200, 200, 0, 0], id="podaffinity.weight multiplies the score"),
        pytest.param(0, [0, 0, 0, 0], id="weight 0 turns it off"),
    ],
)
def test_score_weight(weight: int, expected: list[int]) -> None:
    policy_yaml = policy_text(
        "enqueue, allocate",
        ["gang", "nodeorder"],
        arguments={
            "nodeorder": {
                "leastrequested.weight": 0,
                "balancedresource.weight": 0,
                "nodeaffinity.weight": 0,
                "imagelocality.weight": 0,
                "tainttoleration.weight": 0,
                "podaffinity.weight": weight,
            }
        },
    )
    ssn, task = session(
        [DB_ON_N1], policy_yaml, affinity=affinity(preferred=[(10, term({"app": "db"}))])
    )
    assert ssn.node_order(task, np.arange(len(ssn.nodes), dtype=np.intp)).tolist() == expected


# -- through the whole engine ------------------------------------------------------------------


def replicas(n: int, **kwargs: Any) -> list[Obj]:
    pods = [pod(f"web-{i}", group="web", labels={"app": "web"}, **kwargs) for i in range(n)]
    return [podgroup("web", min_member=1), *pods]


def test_scenario_anti_affinity_spreads_replicas_one_per_node() -> None:
    sim = scenario(
        [*cluster(), *replicas(5, affinity=affinity(anti=[term({"app": "web"}, HOST)]))],
        policy_yaml=policy_text("enqueue, allocate", ["gang"], ["predicates", "nodeorder"]),
    )
    placed_on = binds(sim)
    assert len(placed_on) == 4
    assert sorted(placed_on.values()) == NODES


def test_scenario_affinity_keeps_a_group_in_the_zone_of_its_first_pod() -> None:
    sim = scenario(
        [*cluster(), *replicas(4, affinity=affinity([term({"app": "web"})]))],
        policy_yaml=policy_text("enqueue, allocate", ["gang"], ["predicates", "nodeorder"]),
    )
    zones = {ZONES.get(n) for n in binds(sim).values()}
    assert len(binds(sim)) == 4
    assert len(zones) == 1
    assert None not in zones


def test_scenario_preferred_affinity_pulls_the_pod_next_to_its_peer() -> None:
    sim = scenario(
        [
            *cluster(),
            placed("db", "n3", {"app": "db"}),
            podgroup("pg"),
            pod("p", group="pg", affinity=affinity(preferred=[(100, term({"app": "db"}, HOST))])),
        ]
    )
    assert binds(sim) == {"default/p": "n3"}
