"""enqueue: which Pending PodGroups become Inqueue (volcano.md §2.5, §3.2, §4.2).

A job passes when ``minResources`` is nil or every voting plugin permits ``JobEnqueueable``
(§3.3). The overcommit plugin admits while ``minResources`` of all admitted jobs plus the used
resources fit in the cluster's allocatable × ``overcommit-factor`` (default 1.2); a rejection is a
Normal ``Unschedulable`` PodGroup event ``resource in cluster is overused[: overused <res>, …]``.
"""

from __future__ import annotations

from typing import Any

import pytest

from builders import Obj, binds, default_policy_with, node, pod, podgroup, queue, scenario, summary
from caldera.framework.intents import Event
from caldera.simulate.runner import Simulation

T0 = 1_800_000_000.0
OVERUSED_CPU = "resource in cluster is overused: overused cpu"


def phases(sim: Simulation) -> dict[str, str]:
    return {k: v["phase"] for k, v in summary(sim)["podGroups"].items()}


def events(sim: Simulation, cycle: int = 0) -> list[Event]:
    return list(sim.cycles[cycle].result.events)


def rejected(name: str, message: str = OVERUSED_CPU) -> Event:
    return Event("PodGroup", "default", name, "Normal", "Unschedulable", message)


# -- minResources nil --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("min_resources", "phase"),
    [
        pytest.param(None, "Inqueue", id="without minResources a job is admitted whatever it asks"),
        pytest.param({"cpu": "100"}, "Pending", id="the same job with minResources is rejected"),
    ],
)
def test_a_job_without_min_resources_is_always_admitted(
    min_resources: dict[str, str] | None, phase: str
) -> None:
    sim = scenario(
        [
            node("n1", cpu="1"),
            podgroup("pg", min_resources=min_resources),
            pod("a", group="pg", cpu="100"),
        ]
    )
    assert phases(sim) == {"default/pg": phase}
    assert binds(sim) == {}


@pytest.mark.parametrize(
    ("objects", "phase", "rejected_jobs", "bound"),
    [
        pytest.param(
            [
                node("n1", cpu="4"),
                podgroup("first", min_resources={"cpu": "4"}, created=T0),
                podgroup("free", created=T0 + 1),
                podgroup("third", min_resources={"cpu": "1"}, created=T0 + 2),
            ],
            {"default/first": "Inqueue", "default/free": "Inqueue", "default/third": "Pending"},
            ["third"],
            {},
            # 4 + 1 > 4 × 1.2: the third job is over; the one without minResources does not count
            id="a job without minResources is admitted when the cluster is fully claimed",
        ),
        pytest.param(
            [
                node("n1", cpu="4", memory="64Gi"),
                podgroup("j1", min_resources={"cpu": "2"}, created=T0),
                podgroup("j2", min_resources={"cpu": "2"}, created=T0 + 1),
                podgroup("j3", min_resources={"cpu": "1"}, created=T0 + 2),
            ],
            {"default/j1": "Inqueue", "default/j2": "Inqueue", "default/j3": "Pending"},
            ["j3"],
            {},
            # 2 + 2 = 4 ≤ 4.8; then 4 + 1 = 5 > 4.8
            id="admitted jobs hold their minimum against later ones",
        ),
        pytest.param(
            [
                node("n1", cpu="4"),
                podgroup("big", min_resources={"cpu": "100"}, created=T0),
                pod("b", group="big"),
                podgroup("small", min_resources={"cpu": "1"}, created=T0 + 1),
                pod("s", group="small"),
            ],
            {"default/big": "Pending", "default/small": "Inqueue"},
            ["big"],
            {"default/s": "n1"},
            id="a rejected job does not block a smaller one behind it",
        ),
    ],
)
def test_jobs_are_admitted_in_creation_order_while_their_minimums_fit_the_budget(
    objects: list[Obj], phase: dict[str, str], rejected_jobs: list[str], bound: dict[str, str]
) -> None:
    sim = scenario(objects)
    assert phases(sim) == phase
    assert events(sim) == [rejected(name) for name in rejected_jobs]
    assert binds(sim) == bound


# -- overcommit factor -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factor", "min_cpu", "admitted"),
    [
        # A pod of another scheduler uses 2 of the node's 4 cpu.
        pytest.param(None, "2800m", True, id="default factor: 4 × 1.2 − 2 used leaves 2.8 cpu"),
        pytest.param(None, "2900m", False, id="default factor: 2.9 cpu is over"),
        pytest.param(1.5, "4", True, id="factor 1.5: 4 × 1.5 − 2 used leaves 4 cpu"),
        pytest.param(1.5, "4100m", False, id="factor 1.5: 4.1 cpu is over"),
    ],
)
def test_overcommit_factor_admits_or_rejects(
    factor: float | None, min_cpu: str, admitted: bool
) -> None:
    policy_yaml = None
    if factor is not None:
        policy_yaml = default_policy_with(arguments={"overcommit": {"overcommit-factor": factor}})
    sim = scenario(
        [
            node("n1", cpu="4", memory="64Gi"),
            pod("kube", scheduler="default-scheduler", node_name="n1", cpu="2"),
            podgroup("pg", min_resources={"cpu": min_cpu}),
            pod("a", group="pg"),
        ],
        policy_yaml=policy_yaml,
    )
    assert phases(sim) == {"default/pg": "Inqueue" if admitted else "Pending"}
    assert events(sim) == ([] if admitted else [rejected("pg")])
    assert binds(sim) == ({"default/a": "n1"} if admitted else {})


def test_a_rejected_job_stays_pending_and_is_rejected_again_every_cycle() -> None:
    sim = scenario(
        [node("n1", cpu="4"), podgroup("pg", min_resources={"cpu": "5"}), pod("a", group="pg")],
        cycles=3,
    )
    assert binds(sim) == {}
    assert phases(sim) == {"default/pg": "Pending"}
    assert [events(sim, c) for c in range(3)] == [[rejected("pg")]] * 3


# -- order -------------------------------------------------------------------------------------


def _two_queues(**qb: Any) -> list[Obj]:
    # Room (4 × 1.2 = 4.8 cpu) for two of the three 2-cpu jobs. b1 is the oldest job.
    return [
        node("n1", cpu="4", memory="64Gi"),
        queue("qa", created=T0 - 100),
        queue("qb", created=T0 - 50, **qb),
        podgroup("b1", queue="qb", min_resources={"cpu": "2"}, created=T0),
        podgroup("a1", queue="qa", min_resources={"cpu": "2"}, created=T0 + 1),
        podgroup("a2", queue="qa", min_resources={"cpu": "2"}, created=T0 + 2),
    ]


@pytest.mark.parametrize(
    ("qb", "admitted"),
    [
        pytest.param(
            {},
            {"default/a1", "default/a2"},
            id="the queue first in queue order is visited first, older jobs elsewhere wait",
        ),
        pytest.param(
            {"priority": 10},
            {"default/b1", "default/a1"},
            id="a higher-priority queue is visited first",
        ),
    ],
)
def test_jobs_are_admitted_in_queue_order_then_job_order(
    qb: dict[str, Any], admitted: set[str]
) -> None:
    sim = scenario(_two_queues(**qb))
    assert {k for k, v in phases(sim).items() if v == "Inqueue"} == admitted


def test_every_queue_gets_a_turn() -> None:
    # qa's only job is rejected; qb is still visited and its job admitted.
    sim = scenario(
        [
            node("n1", cpu="4"),
            queue("qa", created=T0 - 100),
            queue("qb", created=T0 - 50),
            podgroup("a", queue="qa", min_resources={"cpu": "100"}, created=T0),
            podgroup("b", queue="qb", min_resources={"cpu": "1"}, created=T0 + 1),
        ]
    )
    assert phases(sim) == {"default/a": "Pending", "default/b": "Inqueue"}


# -- what enqueue looks at ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "phase",
    [
        pytest.param("Inqueue", id="an Inqueue job is not re-checked"),
        pytest.param("Running", id="a Running job is not re-checked"),
    ],
)
def test_only_pending_jobs_are_considered(phase: str) -> None:
    sim = scenario([node("n1", cpu="4"), podgroup("pg", min_resources={"cpu": "100"}, phase=phase)])
    assert events(sim) == []


def test_a_podgroup_whose_queue_does_not_exist_is_left_out() -> None:
    sim = scenario(
        [node("n1", cpu="4"), podgroup("pg", queue="missing"), pod("a", group="pg")], cycles=2
    )
    assert binds(sim) == {}
    pg = summary(sim)["podGroups"]["default/pg"]
    assert (pg["phase"], pg["conditions"]) == ("Pending", [])
    assert (
        "PodGroup (podgroups.scheduling.volcano.sh) "
        "default/pg: spec.queue: queue 'missing' does not exist"
    ) in [str(p) for p in sim.cycles[0].problems]


# -- which reason a waiting pod is given ----------------------------------------------------------


def pod_messages(sim: Simulation) -> dict[str, str]:
    return {c.name: c.message for c in sim.cycles[-1].result.pod_conditions}


def gang_over_the_budget(pod_cpu: str) -> Simulation:
    """Two pods of ``pod_cpu`` each in gang g on three 8-cpu nodes, its minResources (40 cpu)
    beyond the overcommit budget (24 × 1.2 = 28.8 cpu)."""
    return scenario(
        [
            *(node(f"n{i}", cpu="8") for i in range(3)),
            podgroup("g", min_member=2, min_resources={"cpu": "40"}),
            *(pod(f"g-{i}", group="g", cpu=pod_cpu) for i in range(2)),
        ]
    )


def test_a_gang_no_node_could_ever_hold_says_insufficient_cpu_not_overused() -> None:
    # 10-cpu pods on 8-cpu nodes, and minResources beyond the overcommit budget too: the pod's
    # reason is the one that no quota change would cure
    sim = gang_over_the_budget(pod_cpu="10")
    assert pod_messages(sim) == dict.fromkeys(
        ("g-0", "g-1"), "0/3 nodes are available: 3 Insufficient cpu."
    )
    pg = summary(sim)["podGroups"]["default/g"]
    assert pg["phase"] == "Pending"
    assert pg["conditions"][0]["message"].endswith(
        "Origin reason is g-0: 0/3 nodes are available: 3 Insufficient cpu."
    )


def test_a_gang_that_fits_the_nodes_but_not_the_budget_keeps_the_budget_reason() -> None:
    sim = gang_over_the_budget(pod_cpu="4")
    pg = summary(sim)["podGroups"]["default/g"]
    assert pg["conditions"][0]["message"].endswith(
        f"Origin reason is {OVERUSED_CPU} "
        "(cpu 0 used + 0 admitted + 40 requested > 28800m allocatable × overcommit-factor)"
    )


def test_a_pod_too_big_for_any_node_is_told_so_over_its_queues_share() -> None:
    policy = default_policy_with(actions="allocate, backfill")
    objs: list[Obj] = [
        queue("small", weight=1, capability={"cpu": "2"}),
        node("n0", cpu="8"),
        podgroup("g", min_member=1, queue="small", phase="Inqueue"),
        pod("g-0", group="g", cpu="10"),
        podgroup("h", min_member=1, queue="small", phase="Inqueue"),
        pod("h-0", group="h", cpu="4"),
    ]
    messages = pod_messages(scenario(objs, policy_yaml=policy))
    assert messages["g-0"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert (
        messages["h-0"]
        == "queue small is at its deserved share: cpu 0 held + 4 requested > 2 deserved"
    )


def test_a_podgroup_volcanos_controllers_wrote_is_admitted_and_placed() -> None:
    # Volcano's job controller writes minResources as the pods' quota usage (GetPodQuotaUsage):
    # the quota spellings are not resources the scheduler accounts (Volcano's NewResource drops
    # them), so no node's lack of "requests.cpu" holds the job back
    written = {
        "cpu": "1",
        "requests.cpu": "1",
        "limits.cpu": "2",
        "memory": "1Gi",
        "requests.memory": "1Gi",
        "limits.memory": "1Gi",
        "pods": "1",
        "count/pods": "1",
        "nvidia.com/gpu": "1",
        "requests.nvidia.com/gpu": "1",
    }
    sim = scenario(
        [
            node("n1", cpu="4", extra={"nvidia.com/gpu": "1"}),
            podgroup("pg", min_resources=written),
            pod("a", group="pg", cpu="1", memory="1Gi", extra={"nvidia.com/gpu": "1"}),
        ]
    )
    assert phases(sim) == {"default/pg": "Inqueue"}  # Running once the API says it runs
    assert binds(sim) == {"default/a": "n1"}
