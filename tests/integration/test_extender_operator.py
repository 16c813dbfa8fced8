"""The operator asks an extender over real HTTP from its session process: the example server
(``examples/extender/server.py``) keeps pods off the node it blocks and hears of each one
placed; an extender that is down, and not ignorable, leaves pods pending with its reason."""

from __future__ import annotations

import asyncio
from pathlib import Path

from emulator.handles import K8sHandle
from extender_example import running_extender
from integration.harness import node, pod, running_operator, wait_bound

VERBS = ("onSessionOpen", "onSessionClose", "predicate", "prioritize", "allocateFunc")


def conf(tmp_path: Path, url: str, *, ignorable: bool = False) -> str:
    path = tmp_path / "volcano-scheduler.conf"
    verbs = "".join(f"      extender.{v}Verb: {v}\n" for v in VERBS)
    path.write_text(
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n"
        "- plugins:\n"
        "  - name: priority\n"
        "  - name: gang\n"
        "  - name: extender\n"
        "    arguments:\n"
        f"      extender.urlPrefix: {url}\n"
        f"      extender.ignorable: {str(ignorable).lower()}\n"
        f"{verbs}"
        "- plugins: [{name: predicates}, {name: proportion}]\n"
    )
    return str(path)


async def test_the_extender_steers_pods_and_hears_of_each_placement(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("blocked", cpu="8", **{"example.caldera.dev/blocked": "true"}))
    await k8s.create("nodes", node("open", cpu="4"))
    with running_extender() as (url, ext):
        async with running_operator(k8s, scheduler_conf=conf(tmp_path, url)) as runtime:
            for i in range(3):
                await k8s.create("pods", pod(f"p{i}", namespace=ns), namespace=ns)
            placed = await wait_bound(k8s, "p0", "p1", "p2")
            registry = runtime.metrics.registry
            labels = {"hook": "allocateFunc", "outcome": "ok"}
            async with asyncio.timeout(10):  # the session's result is counted once it is back
                while registry.get_sample_value("caldera_extender_calls_total", labels) != 3:
                    await asyncio.sleep(0.05)
    assert placed == {"p0": "open", "p1": "open", "p2": "open"}  # blocked has more room
    assert sorted(ext.allocated) == [f"{ns}/p{i}" for i in range(3)]
    assert ext.calls["onSessionOpen"] >= 1 and ext.calls["prioritize"] >= 3


async def test_a_down_extender_that_is_not_ignorable_leaves_pods_pending_with_its_reason(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    dead = "http://127.0.0.1:9"
    async with running_operator(k8s, scheduler_conf=conf(tmp_path, dead)):
        await k8s.create("pods", pod("p", namespace=ns), namespace=ns)
        message = ""
        async with asyncio.timeout(20):
            while dead not in message:
                await asyncio.sleep(0.1)
                got = await k8s.get("pods", "p", namespace=ns)
                conditions = (got.get("status") or {}).get("conditions") or []
                message = next(
                    (c.get("message", "") for c in conditions if c["type"] == "PodScheduled"), ""
                )
        assert not (await k8s.get("pods", "p", namespace=ns))["spec"].get("nodeName")
    assert "connection refused" in message


async def test_an_ignorable_extender_that_is_down_does_not_stop_scheduling(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    path = conf(tmp_path, "http://127.0.0.1:9", ignorable=True)
    async with running_operator(k8s, scheduler_conf=path):
        await k8s.create("pods", pod("p", namespace=ns), namespace=ns)
        assert await wait_bound(k8s, "p") == {"p": "n1"}
