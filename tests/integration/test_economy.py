"""What the scheduler writes for pods it cannot place: once per change, never once per session."""

from __future__ import annotations

import asyncio

from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, wait_bound


async def test_pods_that_cannot_fit_are_told_once_however_many_sessions_run(
    k8s: K8sHandle,
) -> None:
    k8s.needs_emulator("it counts status patches in the request log")
    await k8s.create("nodes", node("n1", cpu="2"))
    await k8s.create("pods", pod("fits", cpu="2"))
    waiting = [f"too-big-{i}" for i in range(5)]
    for name in waiting:
        await k8s.create("pods", pod(name, cpu="4"))
    async with running_operator(k8s, schedule_period=0.1) as runtime:
        await wait_bound(k8s, "fits")
        await asyncio.sleep(2.0)  # twenty sessions or more
        assert runtime.scheduler is not None and runtime.scheduler.sessions >= 15
    for name in waiting:
        patches = k8s.find_requests(verb="patch", resource="pods", subresource="status", name=name)
        assert len(patches) == 1, name
    events = [
        e
        for e in await k8s.list("events")
        if e.get("reason") == "FailedScheduling"
        and (e.get("involvedObject") or {}).get("name") in waiting
    ]
    assert len(events) == len(waiting)
    # bigger than the node: that is their reason, whatever the overcommit budget also says
    assert {e["message"] for e in events} == {"0/1 nodes are available: 1 Insufficient cpu."}
