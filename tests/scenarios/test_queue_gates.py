"""Queue-allocation gates: a pod that opts in waits, gated, until its queue has room, and only as
many are let go as the queue can take (Volcano's ``allocateResourcesForTasks`` with the capacity
plugin's reserved tasks, ``buildQueueReservedTasksCache`` and ``queueAllocatableWithReserved``;
beyond Volcano, ``proportion`` too, and gangs let go whole)."""

from __future__ import annotations

from builders import (
    REGISTRY,
    Obj,
    binds,
    node,
    pod,
    podgroup,
    policy,
    policy_text,
    queue,
    scenario,
    state_of,
)
from caldera.simulate.explain import explain
from caldera.simulate.explain import to_table as explain_table
from caldera.simulate.report import report, to_table
from caldera.simulate.runner import Simulation, simulate

GATE = "scheduling.volcano.sh/queue-allocation-gate"
OPT_IN = {GATE: "true"}


def capacity_policy() -> str:
    return policy_text(
        "enqueue, allocate, backfill",
        ["priority", "gang", "conformance"],
        ["predicates", "capacity", "nodeorder"],
    )


def proportion_policy() -> str:
    return policy_text(
        "enqueue, allocate, backfill",
        ["priority", "gang", "conformance"],
        ["drf", "predicates", "proportion", "nodeorder"],
    )


def one(
    name: str, q: str, *, cpu: str = "1", node_name: str = "", gated: bool = False
) -> list[Obj]:
    """A one-pod job in queue ``q``: running on ``node_name``, or pending (gated if asked)."""
    return [
        podgroup(name, queue=q, phase="Running" if node_name else "Inqueue"),
        pod(
            name,
            group=name,
            cpu=cpu,
            node_name=node_name,
            annotations=OPT_IN if gated else None,
            gates=[GATE] if gated else (),
        ),
    ]


def lifted(sim: Simulation) -> list[tuple[int, str]]:
    return [(rec.cycle, g.name) for rec in sim.cycles for g in rec.result.gate_lifts]


def test_a_queue_at_its_capability_keeps_its_pods_gated_and_says_why() -> None:
    objs: list[Obj] = [node("n1", cpu="8"), queue("q", capability={"cpu": "2"})]
    objs += one("run-0", "q", node_name="n1") + one("run-1", "q", node_name="n1")
    objs += one("wait", "q", gated=True)
    sim = scenario(objs, policy_yaml=capacity_policy(), cycles=3)
    assert lifted(sim) == []
    assert "default/wait" not in binds(sim)
    waits = sim.cycles[-1].result.gate_waits
    assert waits["default/wait"].startswith("queue q is at its capability")
    (cond,) = [c for c in sim.cycles[-1].result.pod_conditions if c.name == "wait"]
    assert (cond.reason, cond.message) == (
        "SchedulingGated",
        f"waiting for queue q to have room for it (scheduling gate {GATE})",
    )


def test_when_room_frees_exactly_the_pods_that_fit_are_released_and_then_placed() -> None:
    objs: list[Obj] = [node("n1", cpu="8"), queue("q", capability={"cpu": "4"})]
    objs += one("run-0", "q", node_name="n1") + one("run-1", "q", node_name="n1")
    for i in range(3):
        objs += one(f"wait-{i}", "q", gated=True)
    sim = scenario(objs, policy_yaml=capacity_policy(), cycles=3)
    assert lifted(sim) == [(1, "wait-0"), (1, "wait-1")]
    placed = binds(sim)
    assert {"default/wait-0", "default/wait-1"} <= set(placed)
    assert "default/wait-2" not in placed
    assert report(sim)["gated"]["default/wait-2"].startswith("queue q is at its capability")


def test_a_burst_of_gated_pods_is_never_released_beyond_the_queue() -> None:
    objs: list[Obj] = [node("n1", cpu="32"), queue("q", capability={"cpu": "4"})]
    for i in range(12):
        objs += one(f"burst-{i:02}", "q", gated=True)
    sim = scenario(objs, policy_yaml=capacity_policy(), cycles=5)
    assert len(lifted(sim)) == 4
    assert all(cycle == 1 for cycle, _ in lifted(sim))
    assert len(binds(sim)) == 4


def test_a_lifted_pod_keeps_its_room_from_a_pod_that_arrives_ungated() -> None:
    objs: list[Obj] = [node("n1", cpu="8"), queue("q", capability={"cpu": "1"})]
    objs += one("gated", "q", gated=True)
    sim = scenario(objs, policy_yaml=capacity_policy(), cycles=1)
    assert lifted(sim) == [(1, "gated")]
    # the next cycle: the lifted pod (gate gone) and a newcomer without a gate
    state = sim.state
    for obj in one("newcomer", "q"):
        if obj.__class__.__name__ == "Pod":
            state.pods["default/newcomer"] = obj  # type: ignore[assignment]
        else:
            state.podgroups["default/newcomer"] = obj  # type: ignore[assignment]
    after = simulate(
        state, policy(capacity_policy(), REGISTRY), REGISTRY, scheduler_names=["volcano"]
    )
    placed = binds(after)
    assert "default/gated" in placed
    assert "default/newcomer" not in placed


def test_proportion_releases_gated_pods_up_to_the_queues_deserved_share() -> None:
    objs: list[Obj] = [node("n1", cpu="4"), queue("a"), queue("b")]
    for i in range(4):
        objs += one(f"a-{i}", "a", gated=True)
    for i in range(2):
        objs += one(f"b-{i}", "b")
    sim = scenario(objs, policy_yaml=proportion_policy(), cycles=3)
    assert sorted(name for _, name in lifted(sim)) == ["a-0", "a-1"]
    assert sum(1 for key in binds(sim) if key.startswith("default/a-")) == 2
    assert sum(1 for key in binds(sim) if key.startswith("default/b-")) == 2
    assert "deserved" in sim.cycles[-1].result.gate_waits["default/a-2"]


def test_a_gang_is_released_whole_or_not_at_all() -> None:
    objs: list[Obj] = [node("n1", cpu="16"), queue("q", capability={"cpu": "4"})]
    objs.append(podgroup("gang", queue="q", min_member=3, phase="Inqueue"))
    objs += [
        pod(f"gang-{i}", group="gang", cpu="2", annotations=OPT_IN, gates=[GATE]) for i in range(3)
    ]
    sim = scenario(objs, policy_yaml=capacity_policy(), cycles=2)
    assert lifted(sim) == []
    assert sim.cycles[-1].result.gate_waits["default/gang-0"] == (
        "its gang needs 3 pods to start and queue q has room for 2 of them now"
    )


def test_a_pod_held_by_another_gate_is_neither_placed_nor_given_a_condition() -> None:
    objs: list[Obj] = [node("n1", cpu="8"), queue("q")]
    objs += [
        podgroup("held", queue="q", phase="Inqueue"),
        pod("held", group="held", annotations=OPT_IN, gates=[GATE, "example.com/other"]),
    ]
    sim = scenario(objs, policy_yaml=capacity_policy(), cycles=2)
    assert lifted(sim) == [] and binds(sim) == {}
    assert not [c for c in sim.cycles[-1].result.pod_conditions if c.name == "held"]


def test_simulate_shows_the_lifted_and_the_gated_pods() -> None:
    objs: list[Obj] = [node("n1", cpu="8"), queue("q", capability={"cpu": "1"})]
    objs += one("first", "q", gated=True) + one("second", "q", gated=True)
    table = to_table(scenario(objs, policy_yaml=capacity_policy(), cycles=1))
    assert "lifted the queue-allocation gate of 1 pod(s):" in table
    assert "default/first   q" in table
    assert "gated 1 pod(s):" in table
    assert "default/second  queue q is at its capability" in table


def test_explain_says_what_a_gated_pod_waits_for_or_that_it_is_released() -> None:
    objs: list[Obj] = [node("n1", cpu="8"), queue("q", capability={"cpu": "1"})]
    objs += one("first", "q", gated=True) + one("second", "q", gated=True)
    pol = policy(capacity_policy(), REGISTRY)
    first = explain(state_of(objs), pol, REGISTRY, "first", scheduler_names=["volcano"])
    assert first.verdict == (
        f"its {GATE} gate is lifted: queue q has room for it (the session after places it)"
    )
    second = explain(state_of(objs), pol, REGISTRY, "second", scheduler_names=["volcano"])
    assert second.verdict.startswith(f"stays gated by {GATE}: queue q is at its capability")
    assert "verdict: stays gated by" in explain_table(second)
