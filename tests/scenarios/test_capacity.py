"""capacity: elastic queues by deserved, capability and guarantee, and hierarchical queues."""

from __future__ import annotations

from builders import Obj, binds, node, pod, podgroup, policy_text, queue, scenario
from caldera.simulate.runner import Simulation


def capacity_policy(
    actions: str = "enqueue, allocate, backfill", *, hierarchy: bool = False
) -> str:
    text = policy_text(
        actions, ["priority", "gang", "conformance"], ["predicates", "capacity", "nodeorder"]
    )
    if hierarchy:
        text = text.replace("- name: capacity", "- name: capacity\n    enableHierarchy: true")
        assert "enableHierarchy" in text
    return text


def bare(name: str, q: str, cpu: str = "1", node_name: str = "") -> list[Obj]:
    """A one-pod job in queue ``q`` (running on ``node_name`` if given)."""
    phase = "Running" if node_name else "Inqueue"
    return [
        podgroup(name, queue=q, phase=phase),
        pod(name, group=name, cpu=cpu, memory="1Gi", node_name=node_name),
    ]


def placed(sim: Simulation, prefix: str) -> int:
    return sum(1 for key in binds(sim) if key.startswith(f"default/{prefix}"))


def test_a_queue_may_grow_up_to_its_capability_not_beyond() -> None:
    objs: list[Obj] = [node("n1", cpu="8", memory="32Gi")]
    objs += [queue("a", deserved={"cpu": "2"}, capability={"cpu": "3"})]
    for i in range(5):
        objs += bare(f"a-{i}", "a")
    sim = scenario(objs, policy_yaml=capacity_policy())
    assert placed(sim, "a-") == 3  # elastic to its capability, though the node has room


def test_a_queue_under_its_deserved_reclaims_from_one_above_it_down_to_its_deserved() -> None:
    objs: list[Obj] = [node("n1", cpu="4", memory="32Gi")]
    objs += [queue("a", deserved={"cpu": "2"}), queue("b", deserved={"cpu": "2"})]
    for i in range(4):
        objs += bare(f"a-{i}", "a", node_name="n1")
    for i in range(2):
        objs += bare(f"b-{i}", "b")
    sim = scenario(
        objs, policy_yaml=capacity_policy("enqueue, allocate, reclaim, backfill"), cycles=2
    )
    evicted = [e.name for rec in sim.cycles for e in rec.result.evictions]
    assert len(evicted) == 2 and all(name.startswith("a-") for name in evicted)
    assert placed(sim, "b-") == 2  # bound in the second cycle, once the victims are gone


def test_with_the_hierarchy_a_child_is_held_to_its_parents_capability() -> None:
    objs: list[Obj] = [node("n1", cpu="8", memory="32Gi")]
    objs += [
        queue("eng", capability={"cpu": "3"}),
        queue("team-a", parent="eng"),
        queue("team-b", parent="eng"),
    ]
    for i in range(3):
        objs += bare(f"a-{i}", "team-a")
        objs += bare(f"b-{i}", "team-b")
    flat = scenario(objs, policy_yaml=capacity_policy())
    assert placed(flat, "") == 6  # without the hierarchy eng's cap binds nobody
    tree = scenario(objs, policy_yaml=capacity_policy(hierarchy=True))
    assert placed(tree, "a-") + placed(tree, "b-") == 3


def test_reclaim_takes_from_a_sibling_before_a_cousin() -> None:
    objs: list[Obj] = [node("n1", cpu="4", memory="32Gi")]
    objs += [
        queue("eng", deserved={"cpu": "3"}),
        queue("ops", deserved={"cpu": "1"}),
        queue("team-a", parent="eng", deserved={"cpu": "2"}),
        queue("team-b", parent="eng", deserved={"cpu": "1"}),
        queue("oncall", parent="ops", deserved={"cpu": "0"}),
    ]
    objs += bare("b-0", "team-b", node_name="n1")
    objs += bare("b-1", "team-b", node_name="n1")
    objs += bare("o-0", "oncall", node_name="n1")
    objs += bare("o-1", "oncall", node_name="n1")
    objs += bare("a-0", "team-a")
    sim = scenario(
        objs, policy_yaml=capacity_policy("enqueue, allocate, reclaim, backfill", hierarchy=True)
    )
    evicted = [e.name for e in sim.cycles[0].result.evictions]
    assert evicted == ["b-1"] or evicted == ["b-0"]  # team-a's sibling, not ops' oncall


def test_a_parent_cycle_is_reported_on_the_queue_and_scheduling_goes_on() -> None:
    objs: list[Obj] = [node("n1", cpu="4", memory="32Gi")]
    objs += [queue("x", parent="y"), queue("y", parent="x")]
    objs += bare("p", "x")
    sim = scenario(objs, policy_yaml=capacity_policy(hierarchy=True))
    events = [(e.kind, e.name, e.reason) for e in sim.cycles[0].result.events if e.kind == "Queue"]
    assert ("Queue", "x", "InvalidQueue") in events
    assert binds(sim) == {"default/p": "n1"}


def _hdrf_policy() -> str:
    text = policy_text(
        "enqueue, allocate, reclaim, backfill",
        ["priority", "gang", "conformance"],
        ["drf", "predicates", "nodeorder"],
    )
    text = text.replace("- name: drf", "- name: drf\n    enableHierarchy: true")
    assert "enableHierarchy" in text
    return text


def eng_and_ops() -> list[Obj]:
    """One 8-cpu node and two queues in a hierarchy: a under root/eng (weight 3), b under
    root/ops (weight 1)."""
    eng = {"volcano.sh/hierarchy": "root/eng/a", "volcano.sh/hierarchy-weights": "1/3/1"}
    ops = {"volcano.sh/hierarchy": "root/ops/b", "volcano.sh/hierarchy-weights": "1/1/1"}
    return [
        node("n1", cpu="8", memory="32Gi"),
        queue("a", annotations=eng),
        queue("b", annotations=ops),
    ]


def test_hierarchical_drf_reclaims_until_the_subtrees_shares_match_their_weights() -> None:
    # eng weighs 3, ops 1: eng's queue takes back from ops' until 6 and 2 of 8 cpu
    objs = eng_and_ops()
    for i in range(8):
        objs += bare(f"b-{i}", "b", node_name="n1")
        objs += bare(f"a-{i}", "a")
    sim = scenario(objs, policy_yaml=_hdrf_policy(), cycles=2)
    evicted = [e.name for rec in sim.cycles for e in rec.result.evictions]
    assert len(evicted) == 6 and all(name.startswith("b-") for name in evicted)
    assert placed(sim, "a-") == 6


def test_hierarchical_drf_orders_queues_by_their_subtrees_weighted_shares() -> None:
    objs = eng_and_ops()
    for i in range(8):
        objs += bare(f"a-{i}", "a")
        objs += bare(f"b-{i}", "b")
    sim = scenario(objs, policy_yaml=_hdrf_policy().replace("reclaim, ", ""))
    assert (placed(sim, "a-"), placed(sim, "b-")) == (6, 2)
