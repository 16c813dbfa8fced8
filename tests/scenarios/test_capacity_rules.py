"""capacity reclaims as Volcano 1.15's ``capacity.go`` decides: a table in the style of its
``capacity_test.go``, each case named after the Go function whose rule it checks."""

from __future__ import annotations

import pytest
from test_capacity import capacity_policy
from test_preempt_rules import Case, check, cluster, job

from builders import (
    Obj,
    node,
    open_session,
    pod,
    podgroup,
    queue,
    scenario,
    summary,
)

RECLAIM = "enqueue, allocate, reclaim"


def policy(*, hierarchy: bool = False) -> str:
    """Reclaim with capacity choosing the victims: gang and conformance, in the first tier,
    would otherwise decide for it (Volcano's tier rule; volcano#5896)."""
    text = capacity_policy(RECLAIM, hierarchy=hierarchy)
    for name in ("gang", "conformance"):
        text = text.replace(f"- name: {name}\n", f"- name: {name}\n    enableReclaimable: false\n")
    assert text.count("enableReclaimable: false") == 2
    return text


def leveled(level: int) -> str:
    text = policy(hierarchy=True)
    return text.replace(
        "    enableHierarchy: true",
        f"    enableHierarchy: true\n    arguments:\n      ancestorReclaimLevel: {level}",
    )


def _two_teams() -> list[Obj]:
    """root → eng (deserved 2) → e1 (deserved 1), root → ops (deserved 2) → o1 (deserved 2),
    root → z (deserved 2); e1 runs 2 cpu (over its deserved, eng at its deserved), o1 runs 2
    cpu; z waits for 1 cpu on the full 4-cpu node."""
    objs: list[Obj] = [node("n1", cpu="4", memory="32Gi")]
    objs += [queue("eng", deserved={"cpu": "2"}), queue("ops", deserved={"cpu": "2"})]
    objs += [queue("e1", parent="eng", deserved={"cpu": "1"})]
    objs += [queue("o1", parent="ops", deserved={"cpu": "2"}), queue("z", deserved={"cpu": "2"})]
    objs += job("e", pods=2, node_name="n1", q="e1")
    objs += job("o", pods=2, node_name="n1", q="o1")
    objs += job("w", q="z")
    return objs


CASES = {
    "isImmediateVictim: a queue without deserved is reclaimed from first": Case(
        cluster(
            node("n1", cpu="2", memory="32Gi"),
            queue("free"),
            queue("paid", deserved={"cpu": "2"}),
            job("a", cpu="2", node_name="n1", q="free"),
            job("b", cpu="2", q="paid"),
        ),
        policy(),
        {"a-0"},
    ),
    "Preemptive: some requested resource within deserved is enough (cpu, not memory)": Case(
        cluster(
            node("n1", cpu="4", memory="8Gi"),
            queue("qa", deserved={"cpu": "2", "memory": "4Gi"}),
            queue("qb", deserved={"cpu": "1", "memory": "1Gi"}),
            job("a", cpu="1", memory="6Gi", node_name="n1", q="qa"),
            job("b", cpu="3", memory="1Gi", node_name="n1", q="qb"),
            job("more", cpu="1", memory="1Gi", q="qa"),
        ),
        policy(),
        {"b-0"},
    ),
    "no OverusedFn: hierarchical capacity reclaims on a full cluster": Case(
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("qa", parent="root", deserved={"cpu": "2"}),
            queue("qb", parent="root", deserved={"cpu": "2"}),
            job("b", pods=2, cpu="2", node_name="n1", q="qb"),
            job("a", cpu="2", q="qa"),
        ),
        policy(hierarchy=True),
        {"b-0", "b-1"},
        exactly=1,
    ),
    "checkGuaranteeConstraint: a victim never breaks its queue's guarantee": Case(
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("kept", deserved={"cpu": "1"}, guarantee={"cpu": "3"}),
            queue("paid", deserved={"cpu": "3"}),
            job("a", pods=3, node_name="n1", q="kept"),
            job("x", node_name="n1", q="paid"),
            job("b", q="paid"),
        ),
        policy(),
        set(),
    ),
    "shouldSkipReclaimee: a victim sharing no requested resource is skipped": Case(
        cluster(
            node("n1", cpu="2", memory="8Gi"),
            queue("qa"),
            queue("qb", deserved={"cpu": "2"}),
            job("cpu", cpu="2", memory=None, node_name="n1", q="qa", created=1_700_000_000.0),
            job("mem", cpu=None, memory="4Gi", node_name="n1", q="qa", created=1_700_000_100.0),
            job("b", cpu="2", memory=None, q="qb"),
        ),
        policy(),
        {"cpu-0"},
    ),
    "checkDeservedExceedance: a queue within its deserved keeps its pods": Case(
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("qa", deserved={"cpu": "2"}),
            queue("qb", deserved={"cpu": "4"}),
            job("a", pods=2, node_name="n1", q="qa"),
            job("x", pods=2, node_name="n1", q="qb"),
            job("b", q="qb"),
        ),
        policy(),
        set(),
    ),
    # capacity_test.go, Test_capacityPlugin_OnSessionOpenWithoutHierarchy case 9: cpu and
    # memory count only where the deserved is at least minResource, a scalar only where the
    # deserved names it (Resource.GreaterPartlyWithRelevantDimensions)
    "GreaterPartlyWithRelevantDimensions: a queue within its GPU deserved keeps its pod": Case(
        cluster(
            node("n1", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "1"}),
            queue("gpu", deserved={"nvidia.com/gpu": "1"}),
            queue("cpu", deserved={"cpu": "2", "memory": "2Gi"}),
            job("g", cpu="4", memory="4Gi", node_name="n1", q="gpu", extra={"nvidia.com/gpu": "1"}),
            job("c", cpu="1", memory="1Gi", q="cpu"),
        ),
        policy(),
        set(),
    ),
    "GreaterPartlyWithRelevantDimensions: over its deserved in a resource it names": Case(
        cluster(
            node("n1", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "1"}),
            queue("gpu", deserved={"cpu": "2", "nvidia.com/gpu": "1"}),
            queue("cpu", deserved={"cpu": "2", "memory": "2Gi"}),
            job("g", cpu="4", memory="4Gi", node_name="n1", q="gpu", extra={"nvidia.com/gpu": "1"}),
            job("c", cpu="1", memory="1Gi", q="cpu"),
        ),
        policy(),
        {"g-0"},
    ),
    "GreaterPartlyWithRelevantDimensions: an ancestor within its GPU deserved shields": Case(
        cluster(
            node("n1", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "1"}),
            queue("team", deserved={"nvidia.com/gpu": "1"}),
            queue("t1", parent="team", deserved={"cpu": "1", "nvidia.com/gpu": "1"}),
            queue("z", deserved={"cpu": "2"}),
            job("g", cpu="4", memory="4Gi", node_name="n1", q="t1", extra={"nvidia.com/gpu": "1"}),
            job("w", cpu="1", memory="1Gi", q="z"),
        ),
        leveled(1),
        set(),
    ),
    "ancestorReclaimLevel 0: the leaf over its deserved is enough": Case(
        _two_teams(), leveled(0), {"e-0", "e-1"}, exactly=1
    ),
    "getReclaimeeAncestorToCheck: with level 1 the victim's parent must be over too": Case(
        _two_teams(), leveled(1), set()
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_capacity_reclaim(case: Case) -> None:
    check(case, scenario(case.objects, policy_yaml=case.policy, cycles=case.cycles))


def test_with_hierarchy_a_job_in_a_parent_queue_waits_and_says_why() -> None:
    objs: list[Obj] = [node("n1", cpu="4", memory="32Gi")]
    objs += [queue("team"), queue("leaf", parent="team")]
    objs += [podgroup("p", queue="team", phase="Pending"), pod("p-0", group="p")]
    sim = scenario(objs, policy_yaml=policy(hierarchy=True))
    result = sim.cycles[0].result
    assert not result.binds
    events = [e.message for e in result.events if e.kind == "PodGroup" and e.name == "p"]
    assert any("jobs run only in leaf queues" in m for m in events), events
    (group,) = [g for g in result.podgroups if g.name == "p"]
    assert "jobs run only in leaf queues" in group.conditions[0].message
    assert "jobs run only in leaf queues" in result.pod_conditions[0].message


def test_with_hierarchy_victims_come_from_the_nearest_relatives_first() -> None:
    # VictimQueueOrderFn: a sibling under the same parent before a cousin across root
    objs: list[Obj] = [node("n1", cpu="4", memory="32Gi")]
    objs += [queue("eng", deserved={"cpu": "4"}), queue("ops")]
    objs += [queue("e1", parent="eng", deserved={"cpu": "2"}), queue("e2", parent="eng")]
    objs += [queue("o1", parent="ops")]
    objs += job("w", q="e1")
    ssn = open_session(
        cluster(objs, job("e", node_name="n1", q="e2"), job("o", node_name="n1", q="o1")),
        policy(hierarchy=True),
    )
    victims = [t for j in ssn.jobs.values() if j.name in ("e", "o") for t in j.tasks.values()]
    (preemptor,) = ssn.jobs["default/w"].tasks.values()
    assert [t.name for t in ssn.victim_order(victims, preemptor)] == ["e-0", "o-0"]
    assert [t.name for t in ssn.victim_order(victims[::-1], preemptor)] == ["e-0", "o-0"]


# -- enqueue: capacity's jobEnqueueable ----------------------------------------------------------


def _held(name: str, q: str, *, pods: int, minimum: str, phase: str = "Running") -> list[Obj]:
    """A job of ``pods`` 1-cpu pods running on n1, its PodGroup ``phase`` with ``minimum`` cpu
    (and as much memory) as minResources."""
    out: list[Obj] = [
        podgroup(
            name, queue=q, phase=phase, min_resources={"cpu": minimum, "memory": f"{minimum}Gi"}
        )
    ]
    out += [
        pod(f"{name}-{i}", group=name, cpu="1", memory="1Gi", node_name="n1") for i in range(pods)
    ]
    return out


def _waiting(cpu: str) -> Obj:
    return podgroup("new", queue="q", min_resources={"cpu": cpu, "memory": f"{cpu}Gi"})


ENQUEUE_CASES = {
    "jobEnqueueable: what a queue's jobs hold past their minResources (elastic) counts as free": (
        cluster(
            node("n1", cpu="8", memory="32Gi"),
            queue("q", capability={"cpu": "4", "memory": "8Gi"}),
            _held("old", "q", pods=3, minimum="1"),
            _waiting("2"),
        ),
        "Inqueue",  # 2 + 3 held - 2 elastic = 3 <= 4 (without elastic: 5 > 4)
    ),
    "jobEnqueueable: a queue whose jobs hold no more than their minimum stays at capability": (
        cluster(
            node("n1", cpu="8", memory="32Gi"),
            queue("q", capability={"cpu": "4", "memory": "8Gi"}),
            _held("old", "q", pods=3, minimum="3"),
            _waiting("2"),
        ),
        "Pending",  # 2 + 3 held - 0 elastic = 5 > 4
    ),
    "TestNoDoubleCountingForInqueueJobWithBindingTasks: an Inqueue job's placed pods count once": (
        cluster(
            node("n1", cpu="4", memory="8Gi"),
            queue("q", capability={"cpu": "4", "memory": "8Gi"}),
            _held("old", "q", pods=3, minimum="3", phase="Inqueue"),
            _waiting("1"),
        ),
        "Inqueue",  # 1 + 3 held + (3 - 3) owed = 4 <= 4 (counted twice: 7 > 4)
    ),
    "GetInqueueResource: an Inqueue job's unplaced minimum is still held for it": (
        cluster(
            node("n1", cpu="4", memory="8Gi"),
            queue("q", capability={"cpu": "4", "memory": "8Gi"}),
            _held("old", "q", pods=1, minimum="3", phase="Inqueue"),
            _waiting("2"),
        ),
        "Pending",  # 2 + 1 held + (3 - 1) owed = 5 > 4
    ),
}


@pytest.mark.parametrize(("objects", "phase"), ENQUEUE_CASES.values(), ids=ENQUEUE_CASES.keys())
def test_capacity_enqueue(objects: list[Obj], phase: str) -> None:
    sim = scenario(objects, policy_yaml=capacity_policy("enqueue"))
    assert summary(sim)["podGroups"]["default/new"]["phase"] == phase


def test_proportion_counts_an_inqueue_jobs_placed_pods_once_too() -> None:
    # proportion_test.go TestNoDoubleCountingForInqueueJobWithBindingTasks: the same rule
    (objects, phase) = ENQUEUE_CASES[
        "TestNoDoubleCountingForInqueueJobWithBindingTasks: an Inqueue job's placed pods count once"
    ]
    proportion = capacity_policy("enqueue").replace("- name: capacity", "- name: proportion")
    sim = scenario(objects, policy_yaml=proportion)
    assert summary(sim)["podGroups"]["default/new"]["phase"] == phase


# -- queue order: capacity's hierarchical QueueOrderFn -------------------------------------------


def _tree() -> list[Obj]:
    """root → eng (deserved 4, holds 4: share 1) → e1 and e2 (deserved 4, hold 2: share 0.5);
    root → lab (deserved 4, holds 1: share 0.25) → l1 (deserved 4, holds 1); root → z
    (deserved 4, holds 3: share 0.75); every leaf has a pod waiting."""
    objs: list[Obj] = [node("n1", cpu="16", memory="64Gi")]
    objs += [queue(q, deserved={"cpu": "4"}) for q in ("eng", "lab", "z")]
    objs += [queue(q, parent="eng", deserved={"cpu": "4"}) for q in ("e1", "e2")]
    objs += [queue("l1", parent="lab", deserved={"cpu": "4"})]
    for q, held in (("e1", 2), ("e2", 2), ("l1", 1), ("z", 3)):
        objs += job(f"{q}-held", pods=held, node_name="n1", q=q)
        objs += job(f"{q}-wants", q=q)
    return objs


@pytest.mark.parametrize(
    ("queues", "expected"),
    [
        pytest.param(
            ("e1", "z"),
            ["z", "e1"],
            id="QueueOrderFn: leaves go by the shares of their ancestors where the paths part "
            "(eng 1 after z 0.75, though e1's own 0.5 is lower)",
        ),
        pytest.param(
            ("lab", "z"),
            ["z", "lab"],
            id="QueueOrderFn: a leaf before a parent, whatever their shares",
        ),
    ],
)
def test_hierarchical_queue_order(queues: tuple[str, ...], expected: list[str]) -> None:
    ssn = open_session(_tree(), policy(hierarchy=True))
    ordered = sorted((ssn.queues[q] for q in queues), key=ssn.queue_order_key())
    assert [q.name for q in ordered] == expected


# -- volcano#5896: conformance in a tier above capacity -----------------------------------------


def _conformance_above_capacity(*, abstain: bool) -> str:
    """Reclaim with conformance in the first tier and capacity in the second (gang takes no
    part), conformance's switch as given."""
    text = capacity_policy(RECLAIM)
    text = text.replace("- name: gang\n", "- name: gang\n    enableReclaimable: false\n")
    if abstain:
        switch = "    arguments:\n      conformance.abstainWhenNoneProtected: true\n"
        text = text.replace("- name: conformance\n", "- name: conformance\n" + switch)
    return text


def _one_queue_over_one_at_deserved() -> list[Obj]:
    """b holds 2 cpu of a 1-cpu deserved, c holds 2 of 2; a, deserved 2, has two 1-cpu jobs
    waiting on the full 4-cpu node. Once one pod of b is gone both b and c hold exactly what
    they deserve."""
    return cluster(
        node("n1", cpu="4", memory="32Gi"),
        queue("a", deserved={"cpu": "2"}),
        queue("b", deserved={"cpu": "1"}),
        queue("c", deserved={"cpu": "2"}),
        job("b", pods=2, node_name="n1", q="b"),
        job("c", pods=2, node_name="n1", q="c"),
        job("w1", q="a"),
        job("w2", q="a"),
    )


@pytest.mark.parametrize(
    ("abstain", "evicted", "exactly"),
    [
        pytest.param(
            False,
            {"b-0", "b-1", "c-0", "c-1"},
            2,
            id="volcano#5896 kept as Volcano does: conformance's tier decides, and a second pod "
            "goes from a queue already down to its deserved",
        ),
        pytest.param(
            True,
            {"b-1"},
            None,
            id="conformance.abstainWhenNoneProtected: capacity decides, only what is over "
            "deserved goes",
        ),
    ],
)
def test_conformance_above_capacity(abstain: bool, evicted: set[str], exactly: int | None) -> None:
    objects, policy_yaml = (
        _one_queue_over_one_at_deserved(),
        _conformance_above_capacity(abstain=abstain),
    )
    case = Case(objects, policy_yaml, evicted, exactly=exactly)
    check(case, scenario(objects, policy_yaml=policy_yaml))
