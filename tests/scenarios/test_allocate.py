"""allocate: objects in → binds, PodGroup conditions, pending reasons out (volcano.md §3.2, §4.1).

Expected strings are built from the formats in volcano.md: the gang condition message
``"<N>/<T> tasks in gang unschedulable: <FitError>"`` (§4.1), the FitError parts (readiness, the
sorted ``<n> <status>`` histogram plus ``<m> minAvailable``, ``; Pending: <n> <reason>``, and
``. Origin reason is <task>: <per-node error>``), the per-node aggregate
``0/<N> nodes are available: <n> <reason>.`` inside it, and the pod messages of §4.3, where a
pod that fits no node speaks kube-scheduler's words: ``0/<N> nodes are available: <n> <reason>.``
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from builders import (
    Obj,
    binds,
    default_policy_with,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
    scenario,
    summary,
)
from caldera.models.core import Pod
from caldera.simulate.runner import Simulation

T0 = 1_800_000_000.0
"""Creation times set explicitly are later than the builders' defaults (1.7e9 + index)."""


def releasing(p: Pod) -> Pod:
    """The pod as the API shows it while it terminates: deletionTimestamp set."""
    return p.model_copy(
        update={"metadata": p.metadata.model_copy(update={"deletion_timestamp": T0 - 60})}
    )


def pod_conditions(sim: Simulation, cycle: int = -1) -> dict[str, tuple[str, str]]:
    """``{"ns/pod": (reason, message)}`` of the PodScheduled=False conditions of one cycle."""
    return {
        f"{c.namespace}/{c.name}": (c.reason, c.message)
        for c in sim.cycles[cycle].result.pod_conditions
    }


def conditions(sim: Simulation, pg: str) -> dict[str, dict[str, Any]]:
    """The PodGroup's conditions after the run, by type."""
    return {c["type"]: c for c in summary(sim)["podGroups"][pg]["conditions"]}


def bind_order(sim: Simulation, cycle: int = 0) -> list[str]:
    return [f"{b.namespace}/{b.name}" for b in sim.cycles[cycle].result.binds]


# -- single pods -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [node("n1", cpu="4"), pod("a", cpu="1")],
            {"default/a": "n1"},
            id="a pod that fits is bound to the only node",
        ),
        pytest.param(
            [node("small", cpu="1"), node("big", cpu="4"), pod("a", cpu="2")],
            {"default/a": "big"},
            id="a pod is bound to the only node with room for it",
        ),
        pytest.param(
            [node("n1", cpu="4"), pod("a"), pod("b"), pod("c")],
            {"default/a": "n1", "default/b": "n1", "default/c": "n1"},
            id="pods that fit together are all bound",
        ),
        pytest.param(
            [node("n1", cpu="2"), pod("a", cpu="3")],
            {},
            id="a pod larger than every node is not bound",
        ),
        pytest.param(
            [node("n1", cpu="4"), node("n2", cpu="4"), pod("a", nominated="n2")],
            {"default/a": "n2"},
            id="allocateResourcesForTasks: a pod goes to its nominated node first",
        ),
        pytest.param(
            [node("n1", cpu="4"), node("n2", cpu="1"), pod("a", cpu="2", nominated="n2")],
            {"default/a": "n1"},
            id="allocateResourcesForTasks: a nominated node without room is passed over",
        ),
        pytest.param(
            [
                node("n1", cpu="4"),
                node("n2", cpu="4", unschedulable=True),
                pod("a", nominated="n2"),
            ],
            {"default/a": "n1"},
            id="allocateResourcesForTasks: a nominated node its filters refuse is passed over",
        ),
    ],
)
def test_single_pods(objects: list[Obj], expected: dict[str, str]) -> None:
    assert binds(scenario(objects)) == expected


def test_a_pod_that_fits_no_node_says_why_per_node() -> None:
    sim = scenario(
        [
            node("n1", cpu="2"),
            node("n2", cpu="2"),
            podgroup("pg", min_member=1),
            pod("a", group="pg", cpu="3"),
        ]
    )
    assert binds(sim) == {}
    assert pod_conditions(sim) == {
        "default/a": ("Unschedulable", "0/2 nodes are available: 2 Insufficient cpu.")
    }


# -- gangs -------------------------------------------------------------------------------------


def test_a_gang_that_fits_is_bound_whole() -> None:
    sim = scenario(
        [
            node("n1", cpu="2"),
            node("n2", cpu="2"),
            podgroup("pg", min_member=4),
            *(pod(f"p{i}", group="pg") for i in range(4)),
        ]
    )
    placed = binds(sim)
    assert set(placed) == {f"default/p{i}" for i in range(4)}
    assert Counter(placed.values()) == {"n1": 2, "n2": 2}
    assert set(conditions(sim, "default/pg")) == {"Scheduled"}
    assert summary(sim)["unschedulable"] == {}


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param(
            [
                node("n1", cpu="2"),
                node("n2", cpu="2"),
                podgroup("pg", min_member=3),
                *(pod(n, group="pg", cpu="1200m") for n in "abc"),
            ],
            id="a gang whose last task finds no room binds none of its tasks",
        ),
        pytest.param(
            [
                node("n1", cpu="4"),
                node("n2", cpu="4"),
                podgroup("pg", min_member=3),
                *(pod(n, group="pg", cpu="3") for n in "abc"),
            ],
            id="a gang asking more than the whole cluster binds none of its tasks",
        ),
    ],
)
def test_a_gang_that_does_not_fit_binds_nothing(objects: list[Obj]) -> None:
    sim = scenario(objects, cycles=3)
    assert binds(sim) == {}
    pg = summary(sim)["podGroups"]["default/pg"]
    assert pg["phase"] == "Inqueue"
    assert [c["type"] for c in pg["conditions"]] == ["Unschedulable"]


def test_an_unready_gang_gets_volcanos_unschedulable_condition() -> None:
    # Two 2-cpu nodes, three 1.2-cpu tasks: one task per node, the third fits nowhere.
    # N = minAvailable 3 − (0 ready + 2 pending tasks whose last placement was an allocation) = 1.
    sim = scenario(
        [
            node("n1", cpu="2"),
            node("n2", cpu="2"),
            podgroup("pg", min_member=3),
            *(pod(n, group="pg", cpu="1200m") for n in "abc"),
        ]
    )
    cond = conditions(sim, "default/pg")["Unschedulable"]
    assert cond["status"] == "True"
    assert cond["reason"] == "NotEnoughResources"
    assert cond["transitionID"] == sim.cycles[0].result.session_id
    assert cond["message"] == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
        "Pending: 1 Unschedulable, 2 Schedulable. "
        "Origin reason is c: 0/2 nodes are available: 2 Insufficient cpu."
    )
    reasons = pod_conditions(sim)
    assert reasons["default/c"] == (
        "Unschedulable",
        "0/2 nodes are available: 2 Insufficient cpu.",
    )
    # a and b were placed, one per node, before the gang was given up.
    placed = {}
    for name in ("a", "b"):
        reason, message = reasons[f"default/{name}"]
        assert reason == "Schedulable"
        prefix = f"Pod default/{name} can possibly be assigned to "
        suffix = ", once minAvailable is satisfied"
        assert message.startswith(prefix)
        assert message.endswith(suffix)
        placed[name] = message[len(prefix) : -len(suffix)]
    assert sorted(placed.values()) == ["n1", "n2"]


@pytest.mark.parametrize(
    "gang",
    [
        pytest.param(
            [pod(n, group="big", cpu="2500m") for n in "abc"],
            id="a gang that fits no node arrangement",
        ),
        pytest.param(
            [pod(n, group="big", cpu="3") for n in "abc"],
            id="a gang larger than the cluster",
        ),
    ],
)
def test_a_discarded_gang_does_not_block_a_later_job_in_the_same_queue(gang: list[Pod]) -> None:
    # The gang goes first (older) and holds 2 tasks on the two nodes before it is given up; the
    # small job needs more than either node would have left, so it fits only if they come back.
    sim = scenario(
        [
            node("n1", cpu="4"),
            node("n2", cpu="4"),
            podgroup("big", min_member=3, created=T0),
            *gang,
            podgroup("small", min_member=1, created=T0 + 10),
            pod("s", group="small", cpu="2"),
        ]
    )
    assert set(binds(sim)) == {"default/s"}


# -- order -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("qb_priority", "expected"),
    [
        pytest.param(
            0,
            ["default/a0", "default/b0", "default/a1", "default/b1"],
            id="queues of equal priority take turns by share, the older first on a tie",
        ),
        pytest.param(
            10,
            ["default/b0", "default/b1", "default/a0", "default/a1"],
            id="a higher-priority queue is served before an older one",
        ),
    ],
)
def test_queue_order(qb_priority: int, expected: list[str]) -> None:
    sim = scenario(
        [
            node("n1", cpu="4", memory="8Gi"),
            queue("qa", created=T0 - 100),
            queue("qb", created=T0 - 50, priority=qb_priority),
            podgroup("ja", queue="qa", created=T0),
            podgroup("jb", queue="qb", created=T0),
            pod("a0", group="ja"),
            pod("a1", group="ja"),
            pod("b0", group="jb"),
            pod("b1", group="jb"),
        ]
    )
    assert bind_order(sim) == expected


@pytest.mark.parametrize(
    ("late_class", "expected"),
    [
        pytest.param("", {"default/early-0": "n1"}, id="the older of two equal jobs goes first"),
        pytest.param(
            "high", {"default/late-0": "n1"}, id="a higher-priority job goes before an older one"
        ),
    ],
)
def test_jobs_in_a_queue_by_priority_then_creation(
    late_class: str, expected: dict[str, str]
) -> None:
    # Room for one of the two jobs only.
    sim = scenario(
        [
            node("n1", cpu="2"),
            priority_class("high", 100),
            podgroup("late", created=T0 + 10, priority_class=late_class),
            pod("late-0", group="late", cpu="2"),
            podgroup("early", created=T0),
            pod("early-0", group="early", cpu="2"),
        ]
    )
    assert binds(sim) == expected


def test_tasks_in_a_job_by_task_priority() -> None:
    # Room for two of three tasks; they are listed (and created) lowest priority first.
    sim = scenario(
        [
            node("n1", cpu="2"),
            podgroup("pg", min_member=1),
            pod("low", group="pg", priority=1),
            pod("high", group="pg", priority=100),
            pod("mid", group="pg", priority=50),
        ]
    )
    assert bind_order(sim) == ["default/high", "default/mid"]


# -- best effort -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy_yaml", "expected"),
    [
        pytest.param(
            default_policy_with(actions="enqueue, allocate"),
            {},
            id="allocate leaves best-effort pods alone",
        ),
        pytest.param(None, {"default/be": "n1"}, id="backfill places best-effort pods"),
    ],
)
def test_best_effort_pods_are_left_to_backfill(
    policy_yaml: str | None, expected: dict[str, str]
) -> None:
    sim = scenario(
        [node("n1"), podgroup("pg"), pod("be", group="pg", cpu=None, memory=None)],
        policy_yaml=policy_yaml,
    )
    assert binds(sim) == expected


# -- what counts on a node ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [node("n1", cpu="4"), pod("a", cpu="1500m")],
            {"default/a": "n1"},
            id="without the other scheduler's pod the node has room",
        ),
        pytest.param(
            [
                node("n1", cpu="4"),
                pod("kube", scheduler="default-scheduler", node_name="n1", cpu="3"),
                pod("a", cpu="1500m"),
            ],
            {},
            id="another scheduler's running pod keeps its cpu",
        ),
        pytest.param(
            [
                node("n1", cpu="4"),
                node("n2", cpu="4"),
                pod("kube", scheduler="default-scheduler", node_name="n1", cpu="3"),
                pod("a", cpu="1500m"),
            ],
            {"default/a": "n2"},
            id="the pod goes to the node the other scheduler left free",
        ),
    ],
)
def test_pods_of_other_schedulers_on_a_node_count(
    objects: list[Obj], expected: dict[str, str]
) -> None:
    sim = scenario(objects)
    assert binds(sim) == expected
    if not expected:
        assert summary(sim)["unschedulable"] == {
            "default/a": "0/1 nodes are available: 1 Insufficient cpu."
        }


def test_pods_of_other_schedulers_without_a_node_are_ignored() -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            pod("kube", scheduler="default-scheduler", cpu="4"),
            pod("a", cpu="4"),
        ]
    )
    assert binds(sim) == {"default/a": "n1"}
    report = summary(sim)
    assert "default/kube" not in report["unschedulable"]
    assert len(report["podGroups"]) == 1  # only ours got a PodGroup


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        pytest.param(
            [node("n1", cpu="8", ready=False), node("n2", cpu="2")],
            {"default/a": "n2", "default/b": "n2"},
            id="only the Ready node is used",
        ),
        pytest.param(
            [node("n1", cpu="8", ready=False)], {}, id="nothing is bound when no node is Ready"
        ),
    ],
)
def test_a_node_that_is_not_ready_gets_nothing(nodes: list[Obj], expected: dict[str, str]) -> None:
    sim = scenario([*nodes, podgroup("pg", min_member=1), *(pod(n, group="pg") for n in "abc")])
    assert binds(sim) == expected
    assert [str(p) for p in sim.cycles[0].problems] == [
        "Node n1: not Ready: takes no new pods this session"
    ]


# -- enqueue present or absent -----------------------------------------------------------------


@pytest.mark.parametrize(
    "policy_yaml",
    [
        pytest.param(
            default_policy_with(actions="allocate, backfill"),
            id="without enqueue, allocate promotes a Pending PodGroup and places it at once",
        ),
        pytest.param(None, id="with enqueue, the job is admitted and placed in the same cycle"),
    ],
)
def test_a_pending_podgroup_is_scheduled_in_the_first_cycle(policy_yaml: str | None) -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=2, min_resources={"cpu": "2"}),
            pod("a", group="pg"),
            pod("b", group="pg"),
        ],
        policy_yaml=policy_yaml,
        cycles=2,
    )
    assert [r.cycle for r in sim.cycles if r.result.binds] == [1]
    assert binds(sim) == {"default/a": "n1", "default/b": "n1"}
    phases = [st.phase for rec in sim.cycles for st in rec.result.podgroups]
    assert phases == ["Inqueue", "Running"]


@pytest.mark.parametrize(
    ("policy_yaml", "expected", "phase"),
    [
        pytest.param(
            default_policy_with(actions="allocate, backfill"),
            {"default/a": "n1"},
            "Inqueue",
            id="without enqueue nothing gates admission",
        ),
        pytest.param(None, {}, "Pending", id="with enqueue an overcommitted job stays Pending"),
    ],
)
def test_allocate_places_only_admitted_jobs_when_enqueue_is_configured(
    policy_yaml: str | None, expected: dict[str, str], phase: str
) -> None:
    # minResources far beyond 1.2 × the cluster: overcommit rejects it at enqueue.
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=1, min_resources={"cpu": "100"}),
            pod("a", group="pg"),
        ],
        policy_yaml=policy_yaml,
    )
    assert binds(sim) == expected
    assert summary(sim)["podGroups"]["default/pg"]["phase"] == phase


# -- gangs with more tasks than minMember ------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [
                node("n1", cpu="4"),
                podgroup("pg", min_member=2),
                *(pod(f"p{i}", group="pg") for i in range(5)),
            ],
            {f"default/p{i}" for i in range(4)},
            id="five one-cpu tasks on a four-cpu node: the first four in order are bound",
        ),
        pytest.param(
            [
                node("n1", cpu="2"),
                node("n2", cpu="2"),
                podgroup("pg", min_member=2),
                pod("a", group="pg"),
                pod("gpu", group="pg", node_selector={"gpu": "true"}),
                pod("c", group="pg"),
                pod("d", group="pg"),
            ],
            {"default/a", "default/c", "default/d"},
            id="a task that fits nowhere does not stop the tasks after it",
        ),
        pytest.param(
            [
                node("n1", cpu="2"),
                node("n2", cpu="2"),
                podgroup("pg", min_member=3),
                pod("a", group="pg"),
                pod("gpu", group="pg", node_selector={"gpu": "true"}),
                pod("c", group="pg"),
            ],
            set(),
            id="when every task is needed, one that fits nowhere fails the gang",
        ),
    ],
)
def test_a_ready_gang_gets_every_extra_task_that_fits(
    objects: list[Obj], expected: set[str]
) -> None:
    assert set(binds(scenario(objects))) == expected


def test_tasks_of_a_role_that_failed_are_skipped() -> None:
    # Volcano's per-role predicate-error cache: once worker-0 fits nowhere, worker-1 (same
    # volcano.sh/task-spec, so assumed to have the same spec) is not filtered again; the ps task
    # after them is still tried.
    role = "volcano.sh/task-spec"
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=1),
            pod(
                "worker-0",
                group="pg",
                annotations={role: "worker"},
                node_selector={"gpu": "true"},
            ),
            pod("worker-1", group="pg", annotations={role: "worker"}),
            pod("ps", group="pg", annotations={role: "ps"}),
        ]
    )
    assert binds(sim) == {"default/ps": "n1"}
    assert summary(sim)["unschedulable"] == {
        "default/worker-0": (
            "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
        ),
        "default/worker-1": (
            "Task worker-1 with role spec worker has already predicated failed, skip"
        ),
    }


# -- pipelining --------------------------------------------------------------------------------


def _pipelined(msg_node: str, name: str) -> tuple[str, str]:
    return (
        "Unschedulable",
        (
            f"Pod default/{name} can possibly be assigned to {msg_node}, "
            "once resource is released and minAvailable is satisfied"
        ),
    )


@pytest.mark.parametrize(
    ("releasing_cpu", "message", "pending"),
    [
        pytest.param(
            "4",
            "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pipelined, 2 minAvailable",
            {"default/a": _pipelined("n1", "a"), "default/b": _pipelined("n1", "b")},
            id="a gang that fits only once a releasing pod is gone is pipelined, not bound",
        ),
        pytest.param(
            "2",
            "1/2 tasks in gang unschedulable: pod group is not ready, "
            "1 Allocated, 1 Pipelined, 2 minAvailable",
            {
                "default/a": (
                    "Schedulable",
                    "Pod default/a can possibly be assigned to n1, once minAvailable is satisfied",
                ),
                "default/b": _pipelined("n1", "b"),
            },
            id="a gang half on idle and half on releasing resources is not bound",
        ),
    ],
)
def test_a_pipelined_gang_binds_nothing_and_says_it_waits_for_release(
    releasing_cpu: str, message: str, pending: dict[str, tuple[str, str]]
) -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("old", min_member=1, phase="Running"),
            releasing(pod("o", group="old", cpu=releasing_cpu, node_name="n1")),
            podgroup("pg", min_member=2),
            pod("a", group="pg", cpu="2"),
            pod("b", group="pg", cpu="2"),
        ],
        cycles=2,
    )
    assert binds(sim) == {}
    pg = summary(sim)["podGroups"]["default/pg"]
    assert pg["phase"] == "Inqueue"
    assert [(c["type"], c["reason"], c["message"]) for c in pg["conditions"]] == [
        ("Unschedulable", "NotEnoughResources", message)
    ]
    assert pod_conditions(sim) == pending
    # The job whose pod is releasing is short of minMember only by that releasing pod: no
    # condition (volcano.md §4.1), and the releasing pod still counts as scheduled (§2.5).
    assert summary(sim)["podGroups"]["default/old"]["conditions"] == []
    assert summary(sim)["podGroups"]["default/old"]["phase"] == "Running"


@pytest.mark.parametrize(
    ("with_gang", "expected"),
    [
        pytest.param(False, {"default/late-0": "n1"}, id="alone, the later job fits now"),
        pytest.param(
            True, {}, id="a pipelined gang keeps its reservations from a later job this session"
        ),
    ],
)
def test_pipelined_reservations_hold_for_the_session(
    with_gang: bool, expected: dict[str, str]
) -> None:
    gang: list[Obj] = [
        podgroup("pg", min_member=2, created=T0),
        pod("a", group="pg", cpu="2"),
        pod("b", group="pg", cpu="2"),
    ]
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("old", min_member=1, phase="Running"),
            releasing(pod("o", group="old", cpu="2", node_name="n1")),
            *(gang if with_gang else []),
            podgroup("late", min_member=1, created=T0 + 10),
            pod("late-0", group="late", cpu="2"),
        ]
    )
    assert binds(sim) == expected


def test_with_the_predicate_error_cache_off_every_task_of_a_failed_role_is_filtered() -> None:
    role = "volcano.sh/task-spec"
    policy = default_policy_with(configurations={"allocate": {"predicateErrorCacheEnable": False}})
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=1),
            pod(
                "worker-0", group="pg", annotations={role: "worker"}, node_selector={"gpu": "true"}
            ),
            pod("worker-1", group="pg", annotations={role: "worker"}),
            pod("ps", group="pg", annotations={role: "ps"}),
        ],
        policy_yaml=policy,
    )
    assert binds(sim) == {"default/ps": "n1", "default/worker-1": "n1"}
