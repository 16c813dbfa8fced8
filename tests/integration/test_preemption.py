"""Preemption end to end: victims are evicted once, through the evictor, and the preemptor's
gang binds once they are gone."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from emulator.handles import K8sHandle
from integration.harness import node, pod, podgroup, running_operator, wait_bound, wait_event

HELM = Path(__file__).resolve().parents[2] / "policies" / "volcano-helm.yaml"


def policy(tmp_path: Path) -> str:
    """The shipped policy with preempt (gang and drf take no part in choosing victims there, so
    single-pod jobs at their minAvailable can be preempted by priority)."""
    conf = tmp_path / "volcano-scheduler.conf"
    text = HELM.read_text().replace(
        'actions: "enqueue, allocate, backfill"', 'actions: "enqueue, allocate, preempt, backfill"'
    )
    assert "preempt" in text
    conf.write_text(text)
    return str(conf)


def prioritised(obj: dict[str, Any], priority_class: str) -> dict[str, Any]:
    obj["spec"]["priorityClassName"] = priority_class
    return obj


async def _cluster(k8s: K8sHandle, low: int) -> None:
    ns = k8s.namespace
    for name, value in (("low", 10), ("high", 1000)):
        await k8s.create("priorityclasses", {"metadata": {"name": name}, "value": value})
    await k8s.create("nodes", node("n1", cpu="4"))
    for i in range(low):
        await k8s.create("pods", prioritised(pod(f"low-{i}", namespace=ns), "low"), namespace=ns)


async def _gang(k8s: K8sHandle) -> dict[str, Any]:
    ns = k8s.namespace
    group = podgroup("train", 2, namespace=ns)
    group["spec"]["priorityClassName"] = "high"
    created = await k8s.create("podgroups", group, namespace=ns)
    for i in range(2):
        body = prioritised(pod(f"train-{i}", group="train", cpu="2", namespace=ns), "high")
        await k8s.create("pods", body, namespace=ns)
    return created


def deletes(k8s: K8sHandle) -> list[str]:
    return sorted(
        r.name for r in k8s.find_requests(verb="delete", resource="pods") if r.status == 200
    )


async def test_a_high_priority_gang_evicts_its_victims_once_and_binds_when_they_are_gone(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it counts the deletes in the request log")
    await _cluster(k8s, low=4)
    async with running_operator(k8s, scheduler_conf=policy(tmp_path)):
        await wait_bound(k8s, *(f"low-{i}" for i in range(4)))
        group = await _gang(k8s)
        bound = await wait_bound(k8s, "train-0", "train-1", timeout=30)
        event = await wait_event(k8s, "Preempted", group)
        await asyncio.sleep(0.5)  # later sessions must not evict anything more
    assert event["message"] == "evicted 4 pod(s): " + ", ".join(
        f"{k8s.namespace}/low-{i}" for i in range(4)
    )
    assert bound == {"train-0": "n1", "train-1": "n1"}
    assert deletes(k8s) == [f"low-{i}" for i in range(4)]  # each victim once, no more


async def test_a_failed_eviction_is_retried_without_choosing_another_victim(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it makes a delete fail")
    await _cluster(k8s, low=6)
    async with running_operator(k8s, scheduler_conf=policy(tmp_path)):
        # six 1-cpu pods on a 4-cpu node: four run, two wait
        names = [f"low-{i}" for i in range(6)]
        running: list[str] = []
        async with asyncio.timeout(20):
            while len(running) < 4:
                await asyncio.sleep(0.05)
                pods = [await k8s.get("pods", n, namespace=k8s.namespace) for n in names]
                running = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
        assert len(running) == 4
        # the victims' deletes fail eight times in all, with backoff: while they are retried the
        # sessions must count the victims as leaving, not choose other ones
        k8s.fail_next(500, verb="delete", resource="pods", times=8)
        await _gang(k8s)
        await wait_bound(k8s, "train-0", "train-1", timeout=30)
        await asyncio.sleep(0.5)
    failed = [r.name for r in k8s.find_requests(verb="delete", resource="pods") if r.status == 500]
    assert failed and set(failed) <= set(deletes(k8s))  # retried until done, the same pods
    assert len(deletes(k8s)) == 4  # four victims in all: the failure chose no fifth
    # while they waited for the victims, the preemptors were nominated to the node
    # (TaskSchedulingReason's nominatedNodeName, written by taskUnschedulable)
    patches = k8s.find_requests(verb="patch", resource="pods", subresource="status")
    nominated = {
        r.name: r.body["status"]["nominatedNodeName"]
        for r in patches
        if r.name.startswith("train-") and "nominatedNodeName" in r.body.get("status", {})
    }
    assert nominated == {"train-0": "n1", "train-1": "n1"}


def closed_tdm_policy(tmp_path: Path) -> str:
    """A policy whose revocable zone rz1 is closed now: its window starts two hours from now."""
    start = datetime.now() + timedelta(hours=2)
    end = start + timedelta(hours=1)
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(
        'actions: "enqueue, allocate, shuffle"\n'
        "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: pdb\n"
        "- plugins:\n  - name: predicates\n  - name: tdm\n    arguments:\n"
        f'      tdm.revocable-zone.rz1: "{start:%H:%M}-{end:%H:%M}"\n'
        '      tdm.evict.period: "1s"\n'
    )
    return str(conf)


async def test_shuffle_evicts_through_the_evictor_once_and_spares_a_pod_a_budget_protects(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it counts the deletes in the request log")
    ns = k8s.namespace
    await k8s.create("nodes", node("rev-1", cpu="8", **{"volcano.sh/revocable-zone": "rz1"}))
    for name in ("kept", "moved"):
        body = pod(name, namespace=ns, annotations={"volcano.sh/revocable-zone": "*"})
        body["metadata"]["labels"] = {"app": name}
        body["spec"]["nodeName"] = "rev-1"
        created = await k8s.create("pods", body, namespace=ns)
        await k8s.update_status("pods", {**created, "status": {"phase": "Running"}})
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "kept"}}},
    }
    created = await k8s.create("poddisruptionbudgets", budget, namespace=ns)
    await k8s.update_status(
        "poddisruptionbudgets",
        {**created, "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}},
    )
    async with running_operator(k8s, scheduler_conf=closed_tdm_policy(tmp_path)) as runtime:
        async with asyncio.timeout(15):
            while "moved" not in deletes(k8s):
                await asyncio.sleep(0.1)
        await asyncio.sleep(2.5)  # more shuffles run: none evicts the pod again, nor the other
        registry = runtime.metrics.registry
        evicted = registry.get_sample_value(
            "volcano_eviction_transactions_total", {"action": "shuffle"}
        )
    assert deletes(k8s) == ["moved"]  # once, and never the pod the budget protects
    assert evicted == 1
