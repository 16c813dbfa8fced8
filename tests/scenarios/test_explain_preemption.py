"""`caldera explain` says what preempt and reclaim would do for a waiting pod, or what stopped
them: per node, the victims or the rule; for the job, the rule that kept them from trying."""

from __future__ import annotations

import json

import pytest
from test_preempt_rules import CLASSES, cluster, job

from builders import REGISTRY, Obj, node, pod, podgroup, policy, policy_text, queue, state_of
from caldera.simulate.explain import Explanation, explain, to_json, to_table

PREEMPT = policy_text("enqueue, allocate, preempt", ["priority"], ["predicates", "proportion"])
RECLAIM = policy_text(
    "enqueue, allocate, reclaim", ["priority", "gang"], ["predicates", "proportion"]
)


def explained(objs: list[Obj], text: str, key: str = "default/high-0") -> Explanation:
    return explain(
        state_of(objs), policy(text, REGISTRY), REGISTRY, key, scheduler_names=["volcano"]
    )


def test_the_victims_it_would_evict_are_listed() -> None:
    objs = cluster(node("n1", cpu="2"), CLASSES, job("low", pods=2, node_name="n1"))
    ex = explained(cluster(objs, job("high", prio="high")), PREEMPT)
    assert ex.victims == ["default/low-1 (preempt)"]
    assert json.loads(to_json(ex))["noVictimsByNode"] is None


CASES = {
    "the job is not starving": (
        cluster(
            node("n1", cpu="2"),
            CLASSES,
            job("low", pods=2, node_name="n1"),
            podgroup("high", min_member=1, phase="Running", priority_class="high"),
            pod("high-run", group="high", node_name="n1", cpu="0", priority_class="high"),
            pod("high-0", group="high", priority_class="high"),
        ),
        policy_text("enqueue, allocate, preempt", ["priority", "gang"], ["predicates"]),
        "preempt: the job is not starving",
        {},
    ),
    "its queue may not grow by the pod (not Preemptive)": (
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("qa", weight=1),
            queue("qb", weight=1),
            job("a", pods=4, node_name="n1", q="qa"),
            job("high", cpu="3", q="qb"),
        ),
        RECLAIM,
        (
            "reclaim: queue qb may not grow by this pod (not Preemptive): queue qb is at its "
            "deserved share"
        ),
        {},
    ),
    "no other queue is reclaimable": (
        cluster(
            node("n1", cpu="4", memory="32Gi"),
            queue("qa", weight=1, reclaimable=False),
            queue("qb", weight=3),
            job("a", pods=4, node_name="n1", q="qa"),
            job("high", q="qb"),
        ),
        RECLAIM,
        "reclaim: no running pod of another reclaimable queue to reclaim",
        {},
    ),
    "the victims are protected by priority": (
        cluster(node("n1", cpu="2"), CLASSES, job("peer", pods=2, node_name="n1", prio="high"))
        + job("high", prio="high"),
        PREEMPT,
        "preempt: no node of the 1 examined could be freed for it",
        {"n1": "(default/peer-0, default/peer-1 protected by priority)"},
    ),
    "the victims are protected by conformance": (
        cluster(
            node("n1", cpu="1"),
            CLASSES,
            job("sys", node_name="n1", namespace="kube-system"),
            job("high", prio="high"),
        ),
        policy_text("enqueue, allocate, preempt", ["priority", "conformance"], ["predicates"]),
        "preempt: no node of the 1 examined could be freed for it",
        {"n1": "(kube-system/sys-0 protected by conformance)"},
    ),
    "the victims are protected by gang": (
        cluster(node("n1", cpu="1"), CLASSES, job("low", node_name="n1"), job("high", prio="high")),
        policy_text("enqueue, allocate, preempt", ["priority", "gang"], ["predicates"]),
        "preempt: no node of the 1 examined could be freed for it",
        {"n1": "(default/low-0 protected by gang)"},
    ),
    "its queue stays at its capability": (
        cluster(
            node("n1", cpu="8", memory="32Gi"),
            CLASSES,
            queue("q", capability={"cpu": "2"}),
            job("low", node_name="n1", q="q"),
            job("high", cpu="3", prio="high", q="q"),
        ),
        PREEMPT,
        "preempt: no node of the 1 examined could be freed for it",
        {"n1": "its queue does not allow it even after evicting every victim (queue q is at"},
    ),
    "the node is ruled out by a filter evictions cannot cure": (
        cluster(
            node("n1", cpu="1"),
            CLASSES,
            job("low", node_name="n1"),
            job("high", prio="high", node_selector={"zone": "b"}),
        ),
        PREEMPT,
        "preempt: every node is ruled out by a filter evictions cannot cure",
        {"n1": "ruled out by a filter evictions cannot cure (node(s) didn't match Pod's node"},
    ),
}


@pytest.mark.parametrize(("objs", "text", "summary", "per_node"), CASES.values(), ids=CASES.keys())
def test_why_nothing_is_evicted(
    objs: list[Obj], text: str, summary: str, per_node: dict[str, str]
) -> None:
    ex = explained(objs, text)
    assert ex.victims == []
    assert ex.no_victims.startswith(summary), ex.no_victims
    for name, part in per_node.items():
        assert part in ex.victim_nodes[name], ex.victim_nodes
    doc = json.loads(to_json(ex))
    assert doc["noVictims"] == ex.no_victims
    assert (doc["noVictimsByNode"] or {}) == ex.victim_nodes
    table = to_table(ex)
    assert f"it would evict nothing: {ex.no_victims}" in table
    for name, why in ex.victim_nodes.items():
        assert f"  {name}: {why}" in table


def test_the_operator_keeps_the_summary_but_not_the_per_node_reasons() -> None:
    # only `caldera explain` shows them: the operator's sessions do not pay for them
    from caldera.operator.loop.decide import new_model
    from caldera.operator.loop.worker import SessionConfig, decide

    objs, text, _, _ = CASES["the victims are protected by priority"]
    config = SessionConfig(["volcano"], "default", bare_pods_in_memory=True)
    result, _ = decide(
        state_of(objs),
        {},
        policy(text, REGISTRY),
        REGISTRY,
        config,
        session_id="op",
        model=new_model(config),
    )
    assert result.preemption_notes["default/high-0"].startswith("preempt: no node")
    assert result.preemption_nodes == {}
    assert explained(objs, text).victim_nodes  # while explain has them
