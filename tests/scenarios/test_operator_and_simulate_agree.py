"""The operator's sessions and `caldera simulate`/`explain` decide alike on the same objects.

The operator groups bare pods in memory; simulate gives them PodGroups as Volcano's controller
would. Either way a running bare pod counts against its queue, and a pod bound to a node that no
longer exists (deleted, the pod garbage collector not through yet) holds nothing.
"""

from __future__ import annotations

from builders import REGISTRY, Obj, node, pod, queue, state_of
from caldera.framework.policy_source import installed_policy
from caldera.operator.loop.decide import new_model
from caldera.operator.loop.worker import SessionConfig, decide
from caldera.simulate.runner import simulate

CONFIG = SessionConfig(
    scheduler_names=["volcano"], default_queue="default", bare_pods_in_memory=True
)


def _both(objs: list[Obj]) -> tuple[set[str], set[str], list[str]]:
    """(pods the operator's session binds, pods simulate binds, the operator's problems)."""
    pol = installed_policy(REGISTRY)
    result, problems = decide(
        state_of(objs), {}, pol, REGISTRY, CONFIG, session_id="op", model=new_model(CONFIG)
    )
    sim = simulate(state_of(objs), pol, REGISTRY, scheduler_names=["volcano"])
    bound_by_sim = {b.name for b in sim.cycles[0].result.binds}
    return {b.name for b in result.binds}, bound_by_sim, [str(p) for p in problems]


def _gone_nodes_cluster() -> list[Obj]:
    """An idle 96-cpu node; 300 running 1-cpu bare pods on nodes that were deleted; two new
    1-cpu pods in a queue capped at 8 cpu."""
    objs: list[Obj] = [
        node("alive", cpu="96", memory="384Gi"),
        queue("team", capability={"cpu": "8"}),
    ]
    notes = {"scheduling.volcano.sh/queue-name": "team"}
    objs += [pod(f"old-{i}", node_name=f"gone-{i % 30}", annotations=notes) for i in range(300)]
    objs += [pod(f"new-{i}", annotations=notes) for i in range(2)]
    return objs


def test_pods_on_deleted_nodes_hold_nothing_and_both_paths_bind_the_new_pods() -> None:
    operator, simulated, problems = _both(_gone_nodes_cluster())
    assert operator == simulated == {"new-0", "new-1"}
    # one line for the condition, with a count, not one per pod
    gone = [p for p in problems if "do not exist" in p]
    assert len(gone) == 1 and "300 pods" in gone[0], problems


def test_running_bare_pods_count_against_their_queue_on_both_paths() -> None:
    notes = {"scheduling.volcano.sh/queue-name": "team"}
    objs: list[Obj] = [node("n1", cpu="16", memory="64Gi"), queue("team", capability={"cpu": "4"})]
    objs += [pod(f"run-{i}", node_name="n1", annotations=notes) for i in range(3)]
    objs += [pod(f"new-{i}", annotations=notes) for i in range(3)]
    operator, simulated, _ = _both(objs)
    assert len(operator) == 1 and operator == simulated  # 3 running + 1 = the queue's 4 cpu
