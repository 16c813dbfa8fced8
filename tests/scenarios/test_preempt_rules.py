"""preempt and reclaim decide as Volcano 1.15's own code does: a table per action.

In the style of Volcano's ``preempt_test.go`` and ``reclaim_test.go``: each case is a cluster,
a policy and the pods that must be evicted (and, where it matters, bound). The Go function each
rule comes from is named in the case's id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from builders import (
    Obj,
    binds,
    node,
    open_session,
    pod,
    podgroup,
    policy_text,
    priority_class,
    queue,
    scenario,
)
from caldera.simulate.runner import Simulation

CLASSES: list[Obj] = [priority_class("low", 10), priority_class("high", 1000)]
PRIORITY_ONLY = policy_text("preempt", ["priority"], ["predicates"])
GANG_NOT_PIPELINED = policy_text("preempt", ["priority", "gang"], ["predicates"]).replace(
    "- name: gang", "- name: gang\n    enableJobPipelined: false"
)
PREEMPT = policy_text("enqueue, allocate, preempt", ["priority"], ["predicates", "proportion"])
PROPORTION_RECLAIM = policy_text(
    "enqueue, allocate, reclaim", ["priority", "gang", "conformance"], ["predicates", "proportion"]
)


def cluster(*parts: Obj | list[Obj]) -> list[Obj]:
    """The objects of ``parts``, lists flattened."""
    out: list[Obj] = []
    for part in parts:
        out.extend(part if isinstance(part, list) else [part])
    return out


def job(
    name: str,
    *,
    pods: int = 1,
    cpu: str | None = "1",
    node_name: str = "",
    prio: str = "low",
    q: str = "default",
    min_member: int = 1,
    created: float | None = None,
    memory: str | None = None,
    namespace: str = "default",
    **extra: object,
) -> list[Obj]:
    """A job of ``pods`` pods (running on ``node_name``, else pending) in queue ``q``."""
    phase = "Running" if node_name else "Inqueue"
    out: list[Obj] = [
        podgroup(
            name,
            namespace=namespace,
            min_member=min_member,
            queue=q,
            phase=phase,
            priority_class=prio,
            created=created,
        )
    ]
    out.extend(
        pod(
            f"{name}-{i}",
            namespace=namespace,
            group=name,
            cpu=cpu,
            memory=memory,
            node_name=node_name,
            priority_class=prio,
            created=created + i if created is not None else None,
            **extra,  # type: ignore[arg-type]
        )
        for i in range(pods)
    )
    return out


@dataclass
class Case:
    objects: list[Obj]
    policy: str
    evicted: set[str]
    """The pods evicted (with ``exactly``: the pods of which that many are)."""
    bound: dict[str, str] = field(default_factory=dict)
    cycles: int = 1
    exactly: int | None = None
    """Where the plugins offer the first victims they are shown and Volcano shows them in its
    map's random order: how many of ``evicted`` go."""


def check(case: Case, sim: Simulation) -> None:
    got = evicted(sim)
    if case.exactly is None:
        assert got == case.evicted
    else:
        assert len(got) == case.exactly and got <= case.evicted, got
    for key, where in case.bound.items():
        assert binds(sim).get(key) == where


def run(case: Case) -> Simulation:
    return scenario(case.objects, policy_yaml=case.policy, cycles=case.cycles)


def evicted(sim: Simulation) -> set[str]:
    return {e.name for rec in sim.cycles for e in rec.result.evictions}


ANTI_X = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "x"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}

ANTI_AFFINITY_ON_ONE_NODE = cluster(
    node("n1", cpu="4", labels={"kubernetes.io/hostname": "n1"}),
    *CLASSES,
    job("other", node_name="n1"),
    job("x", node_name="n1", labels={"app": "x"}),
    job("high", prio="high", affinity=ANTI_X),
)
"""One low-priority pod whose label the pending high-priority pod's anti-affinity refuses."""
AWARE = {"preempt": {"enableTopologyAwarePreemption": True}}
TOPOLOGY_AWARE = policy_text(
    "enqueue, allocate, preempt", ["priority"], ["predicates", "proportion"], configurations=AWARE
)

PREEMPT_CASES = {
    "JobStarving (priority): a priority-only policy evicts one pod for one pending pod": Case(
        cluster(
            node("n1", cpu="4"),
            *CLASSES,
            *job("low", pods=2, cpu="2", node_name="n1"),
            job("high", cpu="2", prio="high"),
        ),
        PRIORITY_ONLY,
        {"low-1"},
    ),
    "JobStarving (gang): enableJobPipelined false still preempts, above minMember": Case(
        cluster(
            node("n1", cpu="4"),
            *CLASSES,
            *job("low", pods=2, cpu="2", node_name="n1"),
            job("high", cpu="2", prio="high"),
        ),
        GANG_NOT_PIPELINED,
        {"low-0", "low-1"},
        exactly=1,
    ),
    "preemptorFitsOnNode: a queue at its capability evicts its own lower-priority pod": Case(
        cluster(
            node("n1", cpu="8", memory="32Gi"),
            *CLASSES,
            queue("q", capability={"cpu": "4"}),
            job("low", cpu="3", node_name="n1", q="q"),
            job("high", cpu="2", prio="high", q="q"),
        ),
        PREEMPT,
        {"low-0"},
    ),
    "PredicateForPreemptAction: required anti-affinity to a low-priority pod evicts it": Case(
        cluster(
            node("n1", cpu="4", labels={"kubernetes.io/hostname": "n1"}),
            *CLASSES,
            job("other", node_name="n1"),
            job("x", node_name="n1", labels={"app": "x"}),
            job("high", prio="high", affinity=ANTI_X),
        ),
        PREEMPT,
        {"x-0"},
        {"default/high-0": "n1"},
        cycles=2,
    ),
    "PredicateForPreemptAction: a node an eviction cannot cure is never a candidate": Case(
        cluster(
            node("n1", cpu="2", labels={"zone": "a"}),
            node("n2", cpu="2"),
            *CLASSES,
            job("low", pods=2, node_name="n1"),
            job("high", prio="high", node_selector={"zone": "b"}),
        ),
        PRIORITY_ONLY,
        set(),
    ),
    "normalPreempt: every node in order; the first that works wins": Case(
        cluster(
            node("n1", cpu="4"),
            node("n2", cpu="2"),
            *CLASSES,
            job("peer", pods=4, node_name="n1", prio="high"),
            job("low", pods=2, node_name="n2"),
            job("high", prio="high"),
        ),
        PRIORITY_ONLY,
        {"low-1"},
    ),
    "BuildVictimsPriorityQueue: of two jobs of one queue the later in job order goes": Case(
        cluster(
            node("n1", cpu="2"),
            *CLASSES,
            job("old", node_name="n1", created=1_700_000_000.0),
            job("new", node_name="n1", created=1_700_000_100.0),
            job("high", prio="high"),
        ),
        PRIORITY_ONLY,
        {"new-0"},
    ),
    "preempt's filter: a BestEffort preemptor only evicts BestEffort pods": Case(
        cluster(
            node("n1", cpu="4", pods="2"),
            *CLASSES,
            job("busy", node_name="n1"),
            job("idle", node_name="n1", cpu=None),
            job("high", prio="high", cpu=None),
        ),
        PRIORITY_ONLY,
        {"idle-0"},
    ),
    "SimulateRemoveTaskFn: predicates with the flags on cure an anti-affinity by removal": Case(
        ANTI_AFFINITY_ON_ONE_NODE,
        TOPOLOGY_AWARE,
        {"x-0"},
        {"default/high-0": "n1"},
        cycles=2,
    ),
    "SimulateRemoveTaskFn: predicates without enablePreemptable/enabledAllocatable see no "
    "removal, so the dry run never cures the anti-affinity (TestPodAntiAffinity)": Case(
        ANTI_AFFINITY_ON_ONE_NODE,
        TOPOLOGY_AWARE.replace(
            "- name: predicates",
            "- name: predicates\n    enablePreemptable: false\n    enabledAllocatable: false",
        ),
        set(),
        cycles=2,
    ),
    "SimulateRemoveTaskFn: one of the two flags is enough to see the removal": Case(
        ANTI_AFFINITY_ON_ONE_NODE,
        TOPOLOGY_AWARE.replace(
            "- name: predicates", "- name: predicates\n    enablePreemptable: false"
        ),
        {"x-0"},
        {"default/high-0": "n1"},
        cycles=2,
    ),
    "TestPodAntiAffinity: a conflicting pod of the preemptor's priority is never a victim": Case(
        cluster(
            node("n1", cpu="12", pods="2", labels={"kubernetes.io/hostname": "n1"}),
            *CLASSES,
            job("w1", cpu="3", node_name="n1", prio="high", labels={"app": "x"}),
            job("w2", cpu="3", node_name="n1"),
            job("w3", cpu="3", prio="high", labels={"app": "x"}, affinity=ANTI_X),
        ),
        TOPOLOGY_AWARE,
        set(),
    ),
    "taskEligibleToPreempt: a pod whose nominated node passes the filters waits for it": Case(
        cluster(
            node("n1", cpu="2"),
            *CLASSES,
            job("low", pods=2, node_name="n1"),
            job("high", prio="high", nominated="n1"),
        ),
        PRIORITY_ONLY,
        set(),
    ),
    "taskEligibleToPreempt: a pod nominated to a node that has gone preempts nothing": Case(
        cluster(
            node("n1", cpu="2"),
            *CLASSES,
            job("low", pods=2, node_name="n1"),
            job("high", prio="high", nominated="n9"),
        ),
        PRIORITY_ONLY,
        set(),
    ),
    "taskEligibleToPreempt: a nominated node refused for good (unresolvable) frees the pod": Case(
        cluster(
            node("n1", cpu="2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
            node("n2", cpu="2"),
            *CLASSES,
            job("low", pods=2, node_name="n2"),
            job("high", prio="high", nominated="n1"),
        ),
        PRIORITY_ONLY,
        {"low-1"},
    ),
    "taskEligibleToPreempt: a lower-priority pod preempted on the nominated node is leaving": Case(
        cluster(
            node("n1", cpu="4", labels={"kubernetes.io/hostname": "n1"}),
            *CLASSES,
            job("x", node_name="n1", labels={"app": "x"}),
            job("gone", node_name="n1", preempted_at=1_700_000_000.0),
            job("high", prio="high", affinity=ANTI_X, nominated="n1"),
        ),
        PRIORITY_ONLY,
        set(),
    ),
    "taskEligibleToPreempt: with nothing leaving there, a curable nominated node preempts": Case(
        cluster(
            node("n1", cpu="4", labels={"kubernetes.io/hostname": "n1"}),
            *CLASSES,
            job("x", node_name="n1", labels={"app": "x"}),
            job("high", prio="high", affinity=ANTI_X, nominated="n1"),
        ),
        PRIORITY_ONLY,
        {"x-0"},
    ),
    "taskEligibleToPreempt: preemptionPolicy Never evicts nothing": Case(
        cluster(
            node("n1", cpu="2"),
            *CLASSES,
            job("low", pods=2, node_name="n1"),
            job("high", prio="high", preemption_policy="Never"),
        ),
        PRIORITY_ONLY,
        set(),
    ),
}


@pytest.mark.parametrize("case", PREEMPT_CASES.values(), ids=PREEMPT_CASES.keys())
def test_preempt(case: Case) -> None:
    check(case, run(case))


def test_topology_aware_preemption_reprieves_victims_it_does_not_need() -> None:
    # victims go youngest first: small (1 cpu), then big (2 cpu), until the 2-cpu pod fits;
    # reprieved in reverse, the small one is not needed after all (SelectVictimsOnNode)
    objs: list[Obj] = [node("n1", cpu="3"), *CLASSES]
    objs += job("big", cpu="2", node_name="n1", created=1_700_000_000.0)
    objs += job("small", cpu="1", node_name="n1", created=1_700_000_100.0)
    objs += job("high", cpu="2", prio="high")
    assert evicted(scenario(objs, policy_yaml=PRIORITY_ONLY)) == {"small-0", "big-0"}
    aware = policy_text("preempt", ["priority"], ["predicates"], configurations=AWARE)
    assert evicted(scenario(objs, policy_yaml=aware)) == {"big-0"}


RECLAIM_CASES = {
    "reclaimForTask: an empty node is no reclaim candidate; allocate binds the pod": Case(
        cluster(node("n1", cpu="4"), job("a")),
        policy_text(
            "enqueue, reclaim, allocate", ["priority", "gang"], ["predicates", "proportion"]
        ),
        set(),
        {"default/a-0": "n1"},
    ),
    "BuildVictimsPriorityQueue: qa, furthest over its share, is reclaimed first": Case(
        cluster(
            node("n1", cpu="6", memory="32Gi"),
            queue("qa", weight=1, created=1_700_000_000.0),
            queue("qb", weight=2, created=1_700_000_100.0),
            queue("qc", weight=3),
            job("a", cpu="3", node_name="n1", q="qa"),
            job("b", cpu="3", node_name="n1", q="qb"),
            job("c", pods=3, min_member=3, q="qc"),
        ),
        PROPORTION_RECLAIM,
        {"a-0"},
    ),
    "proportion ReclaimableFn: a queue holding less than the reclaimer asks is a victim": Case(
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("qa", weight=1),
            queue("qb", weight=3),
            job("a", pods=2, node_name="n1", q="qa"),
            job("b", cpu="3", q="qb"),
        ),
        PROPORTION_RECLAIM,
        {"a-0", "a-1"},
        exactly=1,
    ),
    "reclaim honours preemptionPolicy Never": Case(
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("qa", weight=1),
            queue("qb", weight=3),
            job("a", pods=4, node_name="n1", q="qa"),
            job("b", cpu="3", q="qb", preemption_policy="Never"),
        ),
        PROPORTION_RECLAIM,
        set(),
    ),
    "a queue that is not reclaimable keeps its pods": Case(
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("qa", weight=1, reclaimable=False),
            queue("qb", weight=3),
            job("a", pods=4, node_name="n1", q="qa"),
            job("b", cpu="3", q="qb"),
        ),
        PROPORTION_RECLAIM,
        set(),
    ),
    "Execute: a task its queue may not grow by is passed over, the next one reclaims": Case(
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("qa", weight=1),
            queue("qb", weight=1),
            job("a", pods=4, node_name="n1", q="qa"),
            podgroup("b", min_member=1, queue="qb", phase="Inqueue"),
            pod("b-big", group="b", cpu="3", priority=100),
            pod("b-small", group="b", cpu="1"),
        ),
        PROPORTION_RECLAIM,
        {"a-0", "a-1", "a-2", "a-3"},
        exactly=1,
    ),
}


@pytest.mark.parametrize("case", RECLAIM_CASES.values(), ids=RECLAIM_CASES.keys())
def test_reclaim(case: Case) -> None:
    check(case, run(case))


def test_job_order_ties_fall_back_to_namespace_and_name() -> None:
    # Volcano's JobOrderFn: creation time, then the job ID (namespace/name), never a hash
    names = [f"job-{c}" for c in "qwertyuiopasdfgh"]
    objs: list[Obj] = [node("n1")]
    for name in names:
        objs += [podgroup(name, created=1_700_000_000.0), pod(name, group=name)]
    ssn = open_session(objs, policy_text("allocate", ["predicates"]))
    ordered = sorted(ssn.jobs.values(), key=ssn.job_order_key())
    assert [j.name for j in ordered] == sorted(names)
