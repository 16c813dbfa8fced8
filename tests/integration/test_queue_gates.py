"""Queue-allocation gates against the API: the scheduler lifts the gate (one patch) of exactly
the pods its queue has room for, counts them until they are placed, and lifts more as room frees.

The pods are created with the gate already on, as ``/pods/mutate`` gives it (the emulator calls
no webhooks)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from builders import policy_text
from emulator.handles import K8sHandle
from integration.harness import node, pod, queue, running_operator

GATE = "scheduling.volcano.sh/queue-allocation-gate"


def gated_pod(name: str, namespace: str, q: str) -> dict[str, Any]:
    obj = pod(
        name,
        namespace=namespace,
        annotations={GATE: "true", "scheduling.volcano.sh/queue-name": q},
    )
    obj["spec"]["schedulingGates"] = [{"name": GATE}]
    return obj


def capacity_conf(tmp_path: Path) -> str:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(
        policy_text(
            "enqueue, allocate, backfill",
            ["priority", "gang", "conformance"],
            ["predicates", "capacity", "nodeorder"],
        )
    )
    return str(conf)


async def _gated(k8s: K8sHandle, ns: str) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in await k8s.list("pods", ns)
        if (p.get("spec") or {}).get("schedulingGates")
    )


async def test_only_the_pods_the_queue_has_room_for_are_released_and_more_as_room_frees(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="16", memory="64Gi"))
    small = queue("small")
    small["spec"]["capability"] = {"cpu": "2"}
    await k8s.create("queues", small)
    for i in range(6):
        await k8s.create("pods", gated_pod(f"burst-{i}", ns, "small"), namespace=ns)
    async with running_operator(k8s, scheduler_conf=capacity_conf(tmp_path)):
        first = await _wait_bound_count(k8s, ns, 2)
        await asyncio.sleep(1.5)  # several sessions: nothing more is let go
        assert len(await _bound(k8s, ns)) == 2
        gated = await _gated(k8s, ns)
        assert len(gated) == 4 and not set(gated) & set(first)
        waiting = await k8s.wait_for(
            "pods",
            gated[-1],
            lambda p: any(
                c.get("reason") == "SchedulingGated" and "queue small" in c.get("message", "")
                for c in (p.get("status") or {}).get("conditions") or []
            ),
            namespace=ns,
        )
        assert waiting["spec"]["schedulingGates"] == [{"name": GATE}]

        await k8s.delete("pods", first[0], namespace=ns)  # room for one more
        second = await _wait_bound_count(k8s, ns, 2, without=first[0])
        await asyncio.sleep(1.0)
        assert len(await _gated(k8s, ns)) == 3
        released = sorted({*first, *second})
    if k8s.emulated:  # one patch per released pod, however many sessions saw it
        lifts = [
            r.name
            for r in k8s.find_requests(verb="patch", resource="pods", subresource="")
            if r.status == 200
        ]
        assert sorted(lifts) == released


async def _bound(k8s: K8sHandle, ns: str) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in await k8s.list("pods", ns)
        if (p.get("spec") or {}).get("nodeName")
    )


async def _wait_bound_count(k8s: K8sHandle, ns: str, count: int, without: str = "") -> list[str]:
    async with asyncio.timeout(20):
        while True:
            bound = [name for name in await _bound(k8s, ns) if name != without]
            if len(bound) >= count:
                return bound
            await asyncio.sleep(0.1)
