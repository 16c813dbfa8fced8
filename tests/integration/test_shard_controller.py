"""``caldera shard-controller`` on the emulator, beside two schedulers in hard sharding: it gives
each scheduler the nodes its utilisation range picks (the sharding ConfigMap), the schedulers
follow, and when a scheduler is taken out of the configuration its NodeShard goes and the
controller's next assignment hands its nodes to the other, which places there, no restart."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from caldera.operator.shard_controller import ControllerSettings, run_controller
from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, shard_instance, wait_bound

TWO = """\
schedulerConfigs:
  - name: alpha
    type: volcano
    cpuUtilizationMin: 0.5
    cpuUtilizationMax: 1.0
    minNodes: 0
    maxNodes: 10
  - name: beta
    type: volcano
    cpuUtilizationMin: 0.0
    cpuUtilizationMax: 0.49
    minNodes: 0
    maxNodes: 10
shardSyncPeriod: "1s"
"""
ALPHA_ONLY = """\
schedulerConfigs:
  - name: alpha
    type: volcano
    cpuUtilizationMin: 0.0
    cpuUtilizationMax: 1.0
    minNodes: 0
    maxNodes: 10
shardSyncPeriod: "1s"
"""


def config_map(namespace: str, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-sharding-configmap", "namespace": namespace},
        "data": {"sharding.yaml": text},
    }


@contextlib.asynccontextmanager
async def controller(k8s: K8sHandle) -> AsyncIterator[None]:
    settings = ControllerSettings(
        kubeconfig=str(k8s.kubeconfig_path),
        sharding_configmap_namespace=k8s.namespace,
        leader_elect=False,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_controller(settings, stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)


async def desired(k8s: K8sHandle, name: str, want: list[str]) -> None:
    await k8s.wait_for(
        "nodeshards",
        name,
        lambda s: sorted(s["spec"].get("nodesDesired") or []) == want,
        timeout=20,
    )


async def test_the_controller_assigns_and_reassigns_the_nodes(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it serves the NodeShard CRD")
    for name in ("n0", "n1", "n2"):
        await k8s.create("nodes", node(name, cpu="4", memory="16Gi"))
    busy = pod("busy", scheduler="other", cpu="3")
    busy["spec"]["nodeName"] = "n0"  # 75 % of n0's cpu: alpha's range
    await k8s.create("pods", busy, namespace=k8s.namespace)
    await k8s.create("configmaps", config_map(k8s.namespace, TWO), namespace=k8s.namespace)
    schedulers = [shard_instance(n, "hard") for n in ("alpha", "beta")]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(controller(k8s))
        await desired(k8s, "alpha", ["n0"])
        await desired(k8s, "beta", ["n1", "n2"])
        for options in schedulers:
            await stack.enter_async_context(running_operator(k8s, **options))
        await k8s.create("pods", pod("a0", scheduler="alpha", cpu="1"), namespace=k8s.namespace)
        await k8s.create("pods", pod("b0", scheduler="beta", cpu="1"), namespace=k8s.namespace)
        first = await wait_bound(k8s, "a0", "b0")
        assert first["a0"] == "n0" and first["b0"] in {"n1", "n2"}
        # beta is taken out: its NodeShard goes, alpha's next assignment has every node
        patch = {"data": config_map(k8s.namespace, ALPHA_ONLY)["data"]}
        await k8s.patch("configmaps", "volcano-sharding-configmap", patch, namespace=k8s.namespace)
        await desired(k8s, "alpha", ["n0", "n1", "n2"])
        await k8s.create("pods", pod("a1", scheduler="alpha", cpu="4"), namespace=k8s.namespace)
        moved = await wait_bound(k8s, "a1")
        assert moved["a1"] in {"n1", "n2"}  # n0 has 4 - 3 - 1 = 0 left
    assert await k8s.find("nodeshards", "beta") is None
