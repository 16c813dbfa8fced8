"""Session close: PodGroup phase, counters and conditions, Queue allocated, pod PodScheduled.

Expected values follow volcano.md §2.5 (getPodGroupPhase), §4.1 (conditions upserted by type,
writes only on change ignoring transition IDs and times), §4.3 (pod conditions) and §4.4
(``status.allocated`` summed over Allocated/Binding/Bound/Running tasks up to ``root``). Between
cycles the simulator applies binds (the pod gets its node and phase Running) and stores the status
the session wrote.
"""

from __future__ import annotations

from typing import Any

import pytest

from builders import Obj, binds, node, pod, podgroup, queue, scenario, summary
from caldera.models.volcano import PodGroup, PodGroupCondition
from caldera.simulate.runner import Simulation

T0 = 1_800_000_000.0
READY_REASON = "tasks in gang are ready to be scheduled"


def with_conditions(pg: PodGroup, *conds: PodGroupCondition) -> PodGroup:
    return pg.model_copy(update={"status": pg.status.model_copy(update={"conditions": conds})})


def old_condition(type_: str, reason: str, message: str) -> PodGroupCondition:
    """A condition written by an earlier session."""
    return PodGroupCondition(
        type=type_,
        status="True",
        transition_id="an-earlier-session",
        last_transition_time=T0 - 3600,
        reason=reason,
        message=message,
    )


def statuses(sim: Simulation, name: str) -> list[tuple[str, int, int, int, bool]]:
    """Per cycle: (phase, running, succeeded, failed, changed) the session wrote for ``name``."""
    return [
        (st.phase, st.running, st.succeeded, st.failed, st.changed)
        for rec in sim.cycles
        for st in rec.result.podgroups
        if f"{st.namespace}/{st.name}" == name
    ]


def conditions(sim: Simulation, name: str) -> list[dict[str, Any]]:
    return list(summary(sim)["podGroups"][name]["conditions"])


def running_gang_on_n1(phase_a: str, phase_b: str) -> list[Obj]:
    """A Running PodGroup ``pg`` (minMember 2) whose pods ``a`` and ``b`` are bound to ``n1`` and
    in these phases."""
    return [
        podgroup("pg", min_member=2, phase="Running"),
        pod("a", group="pg", node_name="n1", phase=phase_a),
        pod("b", group="pg", node_name="n1", phase=phase_b),
    ]


# -- the phase machine -------------------------------------------------------------------------


def test_a_gang_that_fits_goes_pending_inqueue_running() -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=2),
            pod("a", group="pg"),
            pod("b", group="pg"),
        ],
        cycles=3,
    )
    assert [b["cycle"] for b in summary(sim)["binds"]] == [1, 1]
    # Cycle 1: enqueue admits it and allocate binds both; bound-but-not-running tasks are not yet
    # "scheduled", so the phase stays Inqueue. Cycle 2: both Running → Running. Cycle 3: no change.
    assert statuses(sim, "default/pg") == [
        ("Inqueue", 0, 0, 0, True),
        ("Running", 2, 0, 0, True),
        ("Running", 2, 0, 0, False),
    ]


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [podgroup("pg", min_member=0)],
            ("Completed", 0, 0, 0),
            id="minMember 0 and no pods: Completed",
        ),
        pytest.param(
            running_gang_on_n1("Succeeded", "Succeeded"),
            ("Completed", 0, 2, 0),
            id="all pods Succeeded: Completed",
        ),
        pytest.param(
            running_gang_on_n1("Succeeded", "Failed"),
            ("Completed", 0, 1, 1),
            id="every pod finished, one failed: Completed",
        ),
        pytest.param(
            running_gang_on_n1("Running", "Succeeded"),
            ("Running", 1, 1, 0),
            id="one pod running, one succeeded: Running",
        ),
        pytest.param(
            running_gang_on_n1("Pending", "Pending"),
            ("Running", 0, 0, 0),
            id="bound pods not yet running count as scheduled: Running",
        ),
        pytest.param(
            [
                podgroup("pg", min_member=2, phase="Running"),
                pod("a", group="pg", cpu="8"),
                pod("b", group="pg", cpu="8"),
            ],
            ("Pending", 0, 0, 0),
            id="a Running job short of minMember falls back to Pending",
        ),
        pytest.param(
            [podgroup("pg", min_member=1)],
            ("Inqueue", 0, 0, 0),
            id="an admitted job without pods stays Inqueue",
        ),
    ],
)
def test_podgroup_phase(objects: list[Obj], expected: tuple[str, int, int, int]) -> None:
    sim = scenario([node("n1", cpu="4"), *objects])
    assert statuses(sim, "default/pg")[0][:4] == expected


def test_running_pods_and_an_unschedulable_condition_this_session_give_unknown() -> None:
    # Two of three tasks run; the third fits no node. The condition written this session makes
    # the phase Unknown. N = 3 − (2 ready + 0) = 1.
    sim = scenario(
        [
            node("n1", cpu="4"),
            node("n2", cpu="1"),
            podgroup("pg", min_member=3, phase="Running"),
            pod("a", group="pg", node_name="n1"),
            pod("b", group="pg", node_name="n1"),
            pod("c", group="pg", cpu="2500m"),
        ]
    )
    assert binds(sim) == {}
    assert statuses(sim, "default/pg") == [("Unknown", 2, 0, 0, True)]
    assert [(c["type"], c["reason"], c["message"]) for c in conditions(sim, "default/pg")] == [
        (
            "Unschedulable",
            "NotEnoughResources",
            (
                "1/3 tasks in gang unschedulable: pod group is not ready, "
                "1 Pending, 2 Running, 3 minAvailable; Pending: 1 Unschedulable. "
                "Origin reason is c: 0/2 nodes are available: 2 Insufficient cpu."
            ),
        )
    ]


def test_an_unschedulable_condition_from_an_earlier_session_does_not_make_unknown() -> None:
    pg = with_conditions(
        podgroup("pg", min_member=2, phase="Running"),
        old_condition("Unschedulable", "NotEnoughResources", "0/2 tasks in gang unschedulable"),
    )
    sim = scenario(
        [
            node("n1", cpu="4"),
            pg,
            pod("a", group="pg", node_name="n1"),
            pod("b", group="pg", node_name="n1"),
        ]
    )
    assert statuses(sim, "default/pg") == [("Running", 2, 0, 0, True)]


# -- conditions --------------------------------------------------------------------------------


def test_a_ready_gang_gets_the_scheduled_condition() -> None:
    # Simulated time: the newest creation time (T0) plus one schedule period.
    sim = scenario([node("n1"), podgroup("pg", min_member=1, created=T0), pod("a", group="pg")])
    assert conditions(sim, "default/pg") == [
        {
            "type": "Scheduled",
            "status": "True",
            "reason": READY_REASON,
            "message": "",
            "transitionID": sim.cycles[0].result.session_id,
            "lastTransitionTime": "2027-01-15T08:00:01Z",
        }
    ]


def test_a_job_without_pods_gets_no_condition() -> None:
    sim = scenario([node("n1"), podgroup("pg", min_member=1, created=T0)])
    assert conditions(sim, "default/pg") == []


def test_conditions_are_upserted_by_type() -> None:
    # An Unschedulable condition from an earlier cycle stays when the gang becomes ready; the new
    # Scheduled condition is added next to it.
    old = old_condition("Unschedulable", "NotEnoughResources", "1/1 tasks in gang unschedulable")
    sim = scenario(
        [
            node("n1"),
            with_conditions(podgroup("pg", min_member=1, created=T0), old),
            pod("a", group="pg"),
        ],
        cycles=2,
    )
    conds = conditions(sim, "default/pg")
    assert [(c["type"], c["transitionID"]) for c in conds] == [
        ("Unschedulable", "an-earlier-session"),
        ("Scheduled", sim.cycles[1].result.session_id),
    ]
    assert conds[0]["message"] == "1/1 tasks in gang unschedulable"


def test_a_condition_of_the_same_type_is_replaced_not_duplicated() -> None:
    old = old_condition("Unschedulable", "NotEnoughResources", "stale message")
    sim = scenario(
        [
            node("n1"),
            with_conditions(podgroup("pg", min_member=1, created=T0), old),
            pod("a", group="pg", node_selector={"gpu": "true"}),
        ]
    )
    conds = conditions(sim, "default/pg")
    assert [(c["type"], c["transitionID"]) for c in conds] == [
        ("Unschedulable", sim.cycles[0].result.session_id)
    ]
    assert conds[0]["message"] == (
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
        "Pending: 1 Unschedulable. Origin reason is a: 0/1 nodes are available: "
        "1 node(s) didn't match Pod's node affinity/selector."
    )


def test_nothing_is_written_when_a_second_cycle_changes_nothing() -> None:
    # Same phase, counters and condition (transition ID and time aside) in cycle 2.
    sim = scenario(
        [node("n1", cpu="1"), podgroup("pg", min_member=1), pod("a", group="pg", cpu="2")],
        cycles=2,
    )
    assert statuses(sim, "default/pg") == [
        ("Inqueue", 0, 0, 0, True),
        ("Inqueue", 0, 0, 0, False),
    ]
    transition_ids = [
        c.transition_id for rec in sim.cycles for st in rec.result.podgroups for c in st.conditions
    ]
    assert transition_ids == [rec.result.session_id for rec in sim.cycles]


# -- queue status.allocated --------------------------------------------------------------------


def test_queue_allocated_sums_placed_tasks_up_to_root() -> None:
    sim = scenario(
        [
            node("n1", cpu="8", memory="16Gi"),
            queue("root", created=T0 - 300),
            queue("eng", parent="root", created=T0 - 200),
            queue("team", parent="eng", created=T0 - 100),
            # team: two tasks bound this cycle (Binding) and one that fits nowhere (Pending).
            podgroup("t", queue="team", min_member=2, created=T0),
            pod("t0", group="t"),
            pod("t1", group="t"),
            pod("t2", group="t", node_selector={"gpu": "true"}),
            # eng's own job: one Running task.
            podgroup("e", queue="eng", min_member=1, phase="Running", created=T0),
            pod("e0", group="e", node_name="n1", cpu="500m"),
            # default (parent root by default): one Running task and one that Succeeded.
            podgroup("d", min_member=1, phase="Running", created=T0),
            pod("d0", group="d", node_name="n1"),
            pod("d1", group="d", node_name="n1", phase="Succeeded"),
        ]
    )
    assert set(binds(sim)) == {"default/t0", "default/t1"}
    allocated = {q: v["allocated"] for q, v in summary(sim)["queues"].items()}
    assert allocated == {
        "team": {"cpu": "2", "memory": "2Gi"},
        "eng": {"cpu": "2500m", "memory": "3Gi"},
        "default": {"cpu": "1", "memory": "1Gi"},
        "root": {"cpu": "3500m", "memory": "4Gi"},
    }


def test_queue_allocated_is_written_only_when_it_changes() -> None:
    sim = scenario(
        [node("n1"), podgroup("pg", min_member=1), pod("a", group="pg")],
        cycles=3,
    )
    # Cycle 1 the task is Binding, cycle 2 Running: the sum is the same, so only cycle 1 writes.
    changed = [
        {q.name: q.changed for q in rec.result.queues if q.name == "default"} for rec in sim.cycles
    ]
    assert changed == [{"default": True}, {"default": False}, {"default": False}]


# -- pod conditions ----------------------------------------------------------------------------


def test_pod_scheduled_reasons_and_the_unschedulable_map() -> None:
    # A gang of three where only two fit: the two placed are "Schedulable" (waiting for the
    # gang), the third "Unschedulable" with the per-node reasons. A bound pod of another job gets
    # no condition.
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("solo", min_member=1, created=T0),
            pod("s", group="solo", cpu="1"),
            podgroup("pg", min_member=3, created=T0 + 1),
            pod("a", group="pg", cpu="1"),
            pod("b", group="pg", cpu="1"),
            pod("c", group="pg", cpu="1", node_selector={"gpu": "true"}),
        ]
    )
    assert binds(sim) == {"default/s": "n1"}
    conds = {f"{c.namespace}/{c.name}": c for c in sim.cycles[0].result.pod_conditions}
    assert {k: c.reason for k, c in conds.items()} == {
        "default/a": "Schedulable",
        "default/b": "Schedulable",
        "default/c": "Unschedulable",
    }
    assert summary(sim)["unschedulable"] == {
        "default/a": "Pod default/a can possibly be assigned to n1, once minAvailable is satisfied",
        "default/b": "Pod default/b can possibly be assigned to n1, once minAvailable is satisfied",
        "default/c": (
            "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
        ),
    }
