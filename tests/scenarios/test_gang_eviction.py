"""gangpreempt and gangreclaim: Caldera's gang-aware choice of victims, beside Volcano's own.

``preempt`` and ``reclaim`` take the first node (best score first) where victims make room, as
Volcano does, even when that breaks a running gang. The gang-aware variants serve the same jobs
under the same rules but pick the node whose victims cost least, where a victim that would take
a running gang below its minMember costs the whole gang.
"""

from __future__ import annotations

from test_preempt_rules import CLASSES, cluster, evicted, job

from builders import Obj, node, podgroup, policy_text, queue, scenario

TIERS = (["priority"], ["predicates", "proportion"])
EXAMINE_ALL = {"minCandidateNodesPercentage": 100}
"""The gang-aware search compares at most ``candidate_nodes()`` nodes (10 % by default)."""


def gang_policy(action: str) -> str:
    return policy_text(action, *TIERS, configurations={action: EXAMINE_ALL})


def _gang_beside_singles() -> list[Obj]:
    """n1 runs a low-priority gang of two 2-cpu pods (minMember 2); n2 runs two single 2-cpu
    low-priority pods. A high-priority pod needs 2 cpu."""
    gang = job("gang", pods=2, cpu="2", node_name="n1", min_member=2)
    return cluster(
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        CLASSES,
        gang,
        job("single-a", cpu="2", node_name="n2"),
        job("single-b", cpu="2", node_name="n2"),
        job("high", cpu="2", prio="high"),
    )


def test_preempt_takes_the_first_node_that_works_even_if_it_breaks_a_gang() -> None:
    sim = scenario(_gang_beside_singles(), policy_yaml=policy_text("preempt", *TIERS))
    assert len(evicted(sim)) == 1 and evicted(sim) <= {"gang-0", "gang-1"}


def test_gangpreempt_takes_a_single_pod_instead_of_breaking_the_gang() -> None:
    sim = scenario(_gang_beside_singles(), policy_yaml=gang_policy("gangpreempt"))
    assert len(evicted(sim)) == 1 and evicted(sim) <= {"single-a-0", "single-b-0"}


def _two_queues() -> list[Obj]:
    """qa (weight 1) runs a gang of two 2-cpu pods on n1 and two single 2-cpu pods on n2, far
    beyond its share; qb (weight 1) waits for one 2-cpu pod."""
    return cluster(
        node("n1", cpu="4", memory="32Gi"),
        node("n2", cpu="4", memory="32Gi"),
        queue("qa", weight=1),
        queue("qb", weight=1),
        job("gang", pods=2, cpu="2", node_name="n1", q="qa", min_member=2),
        job("single-a", cpu="2", node_name="n2", q="qa"),
        job("single-b", cpu="2", node_name="n2", q="qa"),
        podgroup("b", queue="qb", phase="Inqueue"),
        job("b", cpu="2", q="qb")[1:],
    )


def test_reclaim_and_gangreclaim_differ_only_in_which_victims() -> None:
    volcano = scenario(_two_queues(), policy_yaml=policy_text("reclaim", *TIERS))
    assert len(evicted(volcano)) == 1 and evicted(volcano) <= {"gang-0", "gang-1"}
    gang = scenario(_two_queues(), policy_yaml=gang_policy("gangreclaim"))
    assert len(evicted(gang)) == 1 and evicted(gang) <= {"single-a-0", "single-b-0"}


def test_a_priority_only_policy_lets_gangpreempt_preempt_too() -> None:
    objs = cluster(node("n1", cpu="4"), CLASSES, job("low", pods=2, cpu="2", node_name="n1"))
    objs += job("high", cpu="2", prio="high")
    sim = scenario(objs, policy_yaml=policy_text("gangpreempt", ["priority"], ["predicates"]))
    assert evicted(sim) == {"low-1"}
