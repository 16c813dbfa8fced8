"""preempt and reclaim: gang-aware, and never a useless eviction (Volcano's action semantics)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import (
    NOW,
    REGISTRY,
    Obj,
    binds,
    default_policy_with,
    hypernode,
    node,
    pod,
    podgroup,
    policy,
    priority_class,
    queue,
    scenario,
    state_of,
)
from caldera.cli import main
from caldera.models.core import Pod
from caldera.models.policy import PodDisruptionBudget
from caldera.simulate.runner import Simulation, simulate

PREEMPT = default_policy_with(actions="enqueue, allocate, preempt, backfill")
RECLAIM = default_policy_with(actions="enqueue, allocate, reclaim, backfill")
HELM = (Path(__file__).resolve().parents[2] / "policies" / "volcano-helm.yaml").read_text()
HELM_RECLAIM = HELM.replace(
    'actions: "enqueue, allocate, backfill"', 'actions: "enqueue, allocate, reclaim, backfill"'
)
HELM_PREEMPT = HELM.replace(
    'actions: "enqueue, allocate, backfill"', 'actions: "enqueue, allocate, preempt, backfill"'
)


def evictions(sim: Simulation) -> list[tuple[str, str]]:
    return [
        (f"{e.namespace}/{e.name}", e.reason) for rec in sim.cycles for e in rec.result.evictions
    ]


def low_running(n: int, node_name: str, *, group: str = "low", cpu: str = "1") -> list[Pod]:
    return [
        pod(f"{group}-{i}", group=group, cpu=cpu, node_name=node_name, priority_class="low")
        for i in range(n)
    ]


def test_a_starving_high_priority_job_evicts_lower_priority_pods_of_its_queue() -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            priority_class("low", 10),
            priority_class("high", 1000),
            podgroup("low", min_member=1, phase="Running", priority_class="low"),
            *low_running(4, "n1"),
            podgroup("high", min_member=1, phase="Inqueue", priority_class="high"),
            pod("high-0", group="high", cpu="2", priority_class="high"),
        ],
        policy_yaml=PREEMPT,
    )
    gone = evictions(sim)
    assert len(gone) == 2 and {r for _, r in gone} == {"preempt"}
    assert binds(sim) == {}  # pipelined onto what the victims free, bound once they are gone


def test_a_gang_that_cannot_fit_even_after_evicting_evicts_nothing() -> None:
    # two 4-cpu nodes full of low-priority pods; the gang needs three 4-cpu pods
    sim = scenario(
        [
            node("n1", cpu="4"),
            node("n2", cpu="4"),
            priority_class("low", 10),
            priority_class("high", 1000),
            podgroup("low", min_member=1, phase="Running", priority_class="low"),
            *low_running(4, "n1"),
            *[
                pod(f"low-b{i}", group="low", node_name="n2", priority_class="low")
                for i in range(4)
            ],
            podgroup("gang", min_member=3, phase="Inqueue", priority_class="high"),
            *[pod(f"gang-{i}", group="gang", cpu="4", priority_class="high") for i in range(3)],
        ],
        policy_yaml=PREEMPT,
    )
    assert evictions(sim) == []


def test_under_the_helm_policy_equal_priority_is_not_preempted() -> None:
    # (under the built-in policy drf's share comparison decides when priority offers no victim:
    # Volcano's tier rule, so the bigger job of equal priority gives way)
    assert HELM_PREEMPT != HELM
    objs: list[Obj] = [
        node("n1", cpu="2"),
        priority_class("low", 10),
        podgroup("low", min_member=1, phase="Running", priority_class="low"),
        *low_running(2, "n1"),
        podgroup("same", min_member=1, phase="Inqueue", priority_class="low"),
        pod("same-0", group="same", cpu="1", priority_class="low"),
    ]
    assert evictions(scenario(objs, policy_yaml=HELM_PREEMPT)) == []
    assert evictions(scenario(objs, policy_yaml=PREEMPT)) == [("default/low-0", "preempt")]


def test_a_pod_that_never_preempts_evicts_nothing() -> None:
    objs: list[Obj] = [
        node("n1", cpu="2"),
        priority_class("low", 10),
        priority_class("high", 1000),
        podgroup("low", min_member=1, phase="Running", priority_class="low"),
        *low_running(2, "n1"),
        podgroup("high", min_member=1, phase="Inqueue", priority_class="high"),
        pod("high-0", group="high", cpu="1", priority_class="high", preemption_policy="Never"),
    ]
    assert evictions(scenario(objs, policy_yaml=PREEMPT)) == []


def test_a_queue_under_its_share_reclaims_from_a_queue_over_its_share() -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            queue("qa", weight=1),
            queue("qb", weight=1),
            podgroup("a", min_member=1, queue="qa", phase="Running"),
            *low_running(4, "n1", group="a"),
            podgroup("b", min_member=2, queue="qb", phase="Inqueue"),
            *[pod(f"b-{i}", group="b", cpu="1") for i in range(2)],
        ],
        policy_yaml=RECLAIM,
    )
    gone = evictions(sim)
    assert len(gone) == 2 and {r for _, r in gone} == {"reclaim"}
    assert all(name.startswith("default/a-") for name, _ in gone)


def _two_queues(*, qa_running: int = 0) -> list[Obj]:
    """Three 8-cpu nodes; queue qa (weight 1) and qb (weight 3); 30 one-cpu bare pods in each
    queue, or ``qa_running`` of qa's already running (each in its own running PodGroup)."""
    objs: list[Obj] = [node(f"n{i}", cpu="8", memory="32Gi") for i in range(3)]
    objs += [queue("qa", weight=1), queue("qb", weight=3)]
    for q in ("qa", "qb"):
        for i in range(30):
            if q == "qa" and i < qa_running:
                objs.append(podgroup(f"{q}-{i}", queue=q, phase="Running"))
                objs.append(
                    pod(f"{q}-{i}", group=f"{q}-{i}", cpu="1", memory="1Gi", node_name=f"n{i % 3}")
                )
                continue
            notes = {"scheduling.volcano.sh/queue-name": q}
            objs.append(pod(f"{q}-{i}", cpu="1", memory="1Gi", annotations=notes))
    return objs


def _cpu(sim: Simulation, cycle: int) -> dict[str, str]:
    return {q.name: q.allocated["cpu"] for q in sim.cycles[cycle].result.queues if q.name[0] == "q"}


def test_with_volcanos_admission_rule_a_small_queue_holds_the_budget_and_cpu_stays_idle() -> None:
    volcano = HELM.replace("    arguments:\n      proportion.enqueueWithinDeserved: true\n", "")
    assert volcano != HELM
    sim = scenario(_two_queues(), policy_yaml=volcano, cycles=3)
    # qa's jobs are admitted first and sit beyond its share, holding overcommit's budget
    assert _cpu(sim, 2) == {"qa": "6", "qb": "4"}


def test_the_shipped_policy_gives_each_queue_its_share_in_one_cycle_without_reclaim() -> None:
    sim = scenario(_two_queues(), policy_yaml=HELM, cycles=2)
    assert _cpu(sim, 0) == {"qa": "6", "qb": "18"}  # 24 of 24 cpu used, by weight
    assert evictions(sim) == []


def test_with_reclaim_a_queue_under_its_share_takes_it_back_within_two_cycles() -> None:
    # qa already runs 24 pods on the whole cluster when qb's 30 arrive
    sim = scenario(_two_queues(qa_running=24), policy_yaml=HELM_RECLAIM, cycles=3)
    assert len(evictions(sim)) == 18
    assert _cpu(sim, 1) == {"qa": "6", "qb": "18"}
    assert _cpu(sim, 2) == {"qa": "6", "qb": "18"}  # and it stays there


def test_cdp_protects_pods_within_their_cooldown_from_preemption() -> None:
    cooldown = {"volcano.sh/cooldown-time": "1h"}
    objs: list[Obj] = [
        node("n1", cpu="2"),
        priority_class("low", 10),
        priority_class("high", 1000),
        podgroup("low", min_member=1, phase="Running", priority_class="low"),
        # started a minute before the session: still cooling down
        pod(
            "fresh",
            group="low",
            node_name="n1",
            priority_class="low",
            annotations=cooldown,
            created=NOW - 60,
        ),
        pod("old", group="low", node_name="n1", priority_class="low", created=NOW - 60),
        podgroup("high", min_member=1, phase="Inqueue", priority_class="high"),
        pod("high-0", group="high", cpu="1", priority_class="high"),
    ]
    with_cdp = HELM_PREEMPT.replace("- name: conformance", "- name: conformance\n  - name: cdp")
    assert with_cdp != HELM_PREEMPT
    assert evictions(scenario(objs, policy_yaml=with_cdp)) == [("default/old", "preempt")]


def _budget(name: str, selector: dict[str, str], **spec: object) -> PodDisruptionBudget:
    return PodDisruptionBudget.model_validate(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": selector}, **spec},
        }
    )


def test_pdb_never_lets_a_victim_set_break_a_budget() -> None:
    # four web pods with a budget of minAvailable 3: only one may go; the preemptor needs two
    # cpu, so the second victim must be the unprotected batch pod
    objs: list[Obj] = [
        node("n1", cpu="5"),
        priority_class("low", 10),
        priority_class("high", 1000),
        podgroup("web", min_member=1, phase="Running", priority_class="low"),
        *[
            pod(
                f"web-{i}", group="web", node_name="n1", priority_class="low", labels={"app": "web"}
            )
            for i in range(4)
        ],
        podgroup("batch", min_member=1, phase="Running", priority_class="low"),
        pod("batch-0", group="batch", node_name="n1", priority_class="low"),
        podgroup("high", min_member=1, phase="Inqueue", priority_class="high"),
        pod("high-0", group="high", cpu="2", priority_class="high"),
    ]
    with_pdb = HELM_PREEMPT.replace("- name: conformance", "- name: conformance\n  - name: pdb")
    state = state_of(objs)
    state.add(_budget("web", {"app": "web"}, minAvailable=3))
    sim = simulate(state, policy(with_pdb, REGISTRY), REGISTRY, scheduler_names=["volcano"])
    gone = sorted(name for name, _ in evictions(sim))
    assert len(gone) == 2 and "default/batch-0" in gone
    assert sum(1 for name in gone if name.startswith("default/web-")) == 1


PREEMPTION_CLUSTER = (
    """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: low, namespace: default}
spec: {minMember: 1, queue: default, priorityClassName: low}
status: {phase: Running}
"""
    + "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: low-{i}, namespace: default, annotations: {{scheduling.k8s.io/group-name: low}}}}
spec:
  schedulerName: volcano
  nodeName: n1
  priorityClassName: low
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "2"}}}}}}]
status: {{phase: Running}}
"""
        for i in range(2)
    )
    + """---
apiVersion: v1
kind: Pod
metadata: {name: high-0, namespace: default}
spec:
  schedulerName: volcano
  priorityClassName: high
  containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]
"""
)


def test_explain_names_what_preempt_would_evict_for_a_pending_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(PREEMPTION_CLUSTER)
    conf = tmp_path / "policy.yaml"
    conf.write_text(HELM_PREEMPT)
    assert (
        main(["explain", "default/high-0", str(cluster), "--policy", str(conf), "--output", "json"])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["victims"] == ["default/low-1 (preempt)"]  # the younger of two equal pods
    conf.write_text(HELM)  # no preempt: nothing would be evicted, and nothing tried
    argv = ["explain", "default/high-0", str(cluster), "--policy", str(conf), "--output", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["victims"], doc["noVictims"]) == ([], None)
    # a preemptor of lower priority than the running pods: preempt tries and says why not
    conf.write_text(HELM_PREEMPT)
    cluster.write_text(PREEMPTION_CLUSTER.replace("value: 1000", "value: 5"))
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["victims"] == []
    assert doc["noVictims"] == "preempt: no node of the 1 examined could be freed for it"
    assert doc["noVictimsByNode"] == {
        "n1": "preempt: not enough room even after evicting what the plugins allow "
        "(default/low-0, default/low-1 protected by priority)"
    }


def test_a_job_held_back_by_its_queues_share_says_so() -> None:
    sim = scenario(_two_queues(), policy_yaml=HELM, cycles=1)
    reasons = {
        c.message.partition("Origin reason is ")[2] for c in sim.cycles[0].result.pod_conditions
    }
    assert reasons == {
        "queue qa is at its deserved share (cpu: 6, memory: 30Gi) while other queues wait",
        "queue qb is at its deserved share (cpu: 18, memory: 30Gi) while other queues wait",
    }


def _running(name: str, *, prio: str = "low", cpu: str = "1", **extra: object) -> list[Obj]:
    """A one-pod running job on n1."""
    return [
        podgroup(name, min_member=1, phase="Running", priority_class=prio),
        pod(name, group=name, cpu=cpu, node_name="n1", priority_class=prio, **extra),  # type: ignore[arg-type]
    ]


def _waiting(name: str, *, prio: str = "high", cpu: str = "1", **extra: object) -> list[Obj]:
    return [
        podgroup(name, min_member=1, phase="Inqueue", priority_class=prio),
        pod(name, group=name, cpu=cpu, priority_class=prio, **extra),  # type: ignore[arg-type]
    ]


CLASSES: list[Obj] = [priority_class("low", 10), priority_class("high", 1000)]


@pytest.mark.parametrize(
    ("objects", "evicted"),
    [
        pytest.param(
            [*_running("a", namespace="kube-system"), *_running("b"), *_waiting("hi")],
            ["default/b"],
            id="conformance: a kube-system pod is never a victim",
        ),
        pytest.param(
            [*_running("a", scheduler="caldera-b"), *_running("b"), *_waiting("hi")],
            ["default/b"],
            id="another scheduler's pod counts, but is that scheduler's to evict",
        ),
        pytest.param(
            [
                *_running("a", annotations={"volcano.sh/preemptable": "false"}),
                *_running("b"),
                *_waiting("hi"),
            ],
            ["default/b"],
            id="a pod marked volcano.sh/preemptable: false is never a victim",
        ),
        pytest.param(
            [*_running("a"), *_running("b"), *_waiting("hi", preemption_policy="Never")],
            [],
            id="preemptionPolicy Never takes nothing",
        ),
        pytest.param(
            [*_running("b", prio="high"), *_running("a"), *_waiting("hi")],
            ["default/a"],
            id="only lower priority: the equal-priority pod stays",
        ),
    ],
)
def test_who_may_be_preempted(objects: list[Obj], evicted: list[str]) -> None:
    objs: list[Obj] = [node("n1", cpu="2", pods="2"), *CLASSES, *objects]
    sim = scenario(objs, policy_yaml=HELM_PREEMPT)
    assert sorted(name for name, _ in evictions(sim)) == evicted


def test_a_queue_that_is_not_reclaimable_keeps_its_pods() -> None:
    def objs(reclaimable: bool) -> list[Obj]:
        out: list[Obj] = [node("n1", cpu="2", memory="32Gi")]
        out += [queue("qa", reclaimable=reclaimable), queue("qb")]
        for i in range(2):
            out += [
                podgroup(f"a-{i}", queue="qa", phase="Running"),
                pod(f"a-{i}", group=f"a-{i}", node_name="n1"),
            ]
        out += [podgroup("b", queue="qb", phase="Inqueue"), pod("b-0", group="b")]
        return out

    assert evictions(scenario(objs(False), policy_yaml=HELM_RECLAIM)) == []
    assert len(evictions(scenario(objs(True), policy_yaml=HELM_RECLAIM))) == 1


def _bound_to_a_leaf(*, running_on: str | None, pending: int) -> list[Obj]:
    """n1 and n2 (4 cpu each, full of 1-cpu low pods) in HyperNodes leaf1 and leaf2, n3 (as
    full) in none; a high-priority job with a hard tier-1 topology, ``pending`` 2-cpu pods
    waiting and, if ``running_on``, one 1-cpu pod running there."""
    objs: list[Obj] = [node(n, cpu="4") for n in ("n1", "n2", "n3")]
    objs += [hypernode("leaf1", tier=1, nodes=["n1"]), hypernode("leaf2", tier=1, nodes=["n2"])]
    objs += [priority_class("low", 10), priority_class("high", 1000)]
    objs.append(podgroup("low", min_member=1, phase="Running", priority_class="low"))
    for n in ("n1", "n2", "n3"):
        held = 3 if n == running_on else 4
        objs += [
            pod(f"low-{n}-{i}", group="low", node_name=n, priority_class="low") for i in range(held)
        ]
    topology = {"mode": "hard", "highestTierAllowed": 1}
    size = pending + (1 if running_on else 0)
    objs.append(
        podgroup(
            "high",
            min_member=size,
            phase="Running" if running_on else "Inqueue",
            priority_class="high",
            network_topology=topology,
        )
    )
    if running_on:
        objs.append(pod("high-run", group="high", node_name=running_on, priority_class="high"))
    objs += [pod(f"high-{i}", group="high", cpu="2", priority_class="high") for i in range(pending)]
    return objs


def test_a_job_bound_to_a_hypernode_preempts_only_inside_the_hypernode_it_runs_in() -> None:
    # Volcano skips such jobs (volcano#4374); Caldera keeps the victims inside its HyperNode
    for where in ("n1", "n2"):
        gone = evictions(
            scenario(_bound_to_a_leaf(running_on=where, pending=1), policy_yaml=PREEMPT)
        )
        assert len(gone) == 2
        assert all(name.startswith(f"default/low-{where}-") for name, _ in gone), gone


def test_a_gang_bound_to_a_hypernode_takes_all_its_victims_from_one_hypernode() -> None:
    sim = scenario(_bound_to_a_leaf(running_on=None, pending=2), policy_yaml=PREEMPT)
    nodes = {name.split("-")[1] for name, _ in evictions(sim)}
    assert len(evictions(sim)) == 4 and len(nodes) == 1 and nodes <= {"n1", "n2"}


def test_a_sub_group_bound_to_a_hypernode_takes_all_its_victims_from_one_hypernode() -> None:
    objs = _bound_to_a_leaf(running_on=None, pending=0)
    objs = [o for o in objs if o.metadata.name != "high"]
    tp = {
        "name": "tp",
        "subGroupSize": 2,
        "matchLabelKeys": ["replica"],
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    objs.append(
        podgroup(
            "high", min_member=2, phase="Inqueue", priority_class="high", sub_group_policy=[tp]
        )
    )
    # each pod prefers a node of its own: free, they would spread over both HyperNodes
    objs += [
        pod(
            f"high-{i}",
            group="high",
            cpu="2",
            priority_class="high",
            labels={"replica": "a"},
            affinity=_prefers(f"n{i + 1}"),
        )
        for i in range(2)
    ]
    sim = scenario(objs, policy_yaml=PREEMPT)
    nodes = {name.split("-")[1] for name, _ in evictions(sim)}
    assert len(evictions(sim)) == 4 and len(nodes) == 1 and nodes <= {"n1", "n2"}


def _prefers(node_name: str) -> dict[str, object]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
        }
    }
