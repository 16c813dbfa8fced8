"""HyperNodes against the API: a gang bound inside one leaf, the PodGroup told which, and every
HyperNode's ``status.nodeCount`` written by the scheduler."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emulator.handles import K8sHandle
from integration.harness import node, pod, podgroup, running_operator, wait_bound, wait_event

ALLOCATED = "volcano.sh/job-allocated-hypernode"


def hypernode(
    name: str, tier: int, *, nodes: Sequence[str] = (), kids: Sequence[str] = ()
) -> dict[str, Any]:
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": k}}} for k in kids]
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


async def test_a_hard_gang_binds_inside_one_leaf_and_the_hypernodes_get_their_counts(
    k8s: K8sHandle,
) -> None:
    ns = k8s.namespace
    leaves = {"leaf-a": ["a0", "a1"], "leaf-b": ["b0", "b1"]}
    for members in leaves.values():
        for n in members:
            await k8s.create("nodes", node(n, cpu="4"))
    for name, members in leaves.items():
        await k8s.create("hypernodes", hypernode(name, 1, nodes=members))
    await k8s.create("hypernodes", hypernode("spine", 2, kids=list(leaves)))
    busy = pod("busy", cpu="3", namespace=ns)
    busy["spec"]["nodeName"] = "a0"
    await k8s.create("pods", busy, namespace=ns)
    group = podgroup("train", 2, namespace=ns)
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    await k8s.create("podgroups", group, namespace=ns)
    for i in range(2):
        await k8s.create(
            "pods", pod(f"train-{i}", group="train", cpu="3", namespace=ns), namespace=ns
        )
    async with running_operator(k8s):
        bound = await wait_bound(k8s, "train-0", "train-1")
        pg = await k8s.wait_for(
            "podgroups",
            "train",
            lambda o: ALLOCATED in (o["metadata"].get("annotations") or {}),
            namespace=ns,
        )
        counts = {}
        for name in ("leaf-a", "leaf-b", "spine"):
            obj = await k8s.wait_for(
                "hypernodes", name, lambda o: "nodeCount" in (o.get("status") or {})
            )
            counts[name] = obj["status"]["nodeCount"]
    assert set(bound.values()) == {"b0", "b1"}
    assert pg["metadata"]["annotations"][ALLOCATED] == "leaf-b"
    assert counts == {"leaf-a": 2, "leaf-b": 2, "spine": 4}


async def test_a_hypernode_the_tree_must_ignore_gets_a_warning_event_naming_why(
    k8s: K8sHandle,
) -> None:
    await k8s.create("nodes", node("n0"))
    await k8s.create("hypernodes", hypernode("a", 1, nodes=["n0"]))
    clash = await k8s.create("hypernodes", hypernode("b", 1, nodes=["n0"]))
    async with running_operator(k8s):
        event = await wait_event(k8s, "InvalidHyperNode", clash)
    assert event["type"] == "Warning"
    assert event["message"] == "node n0 is also in HyperNode a of tier 1; this HyperNode is ignored"
