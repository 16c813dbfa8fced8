"""Ascend 310P vNPUs end to end in the operator: ClusterD's ConfigMap reaches the session through
the operator's own informers (by label selector, no other ConfigMap listed), a change to it is news,
and the chips reach the pod as ``huawei.com/npu-core`` before its binding."""

from __future__ import annotations

import asyncio
import json
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from builders import MINDCLUSTER_CONFIG_043, REGISTRY
from caldera.operator.app import Runtime
from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, wait_bound

NPU_CORE = "huawei.com/npu-core"
CHIPS = "Ascend310P-0,Ascend310P-1"


def operator_with_vnpus(k8s: K8sHandle, conf: str) -> AbstractAsyncContextManager[Runtime]:
    """``caldera run`` on the policy file ``conf`` with deviceshare's vNPUs on (harness's
    ``running_operator``, given the registry that has them)."""
    return running_operator(k8s, registry=REGISTRY, scheduler_conf=conf)


def npu_node(name: str) -> dict[str, Any]:
    """A 310P node of two 8-core chips, as MindCluster's device plugin and NodeD label it."""
    obj = node(
        name,
        cpu="32",
        memory="128Gi",
        accelerator="huawei-Ascend310P",
        servertype="Ascend310P-8",
        **{"node.kubernetes.io/npu.chip.name": "310P3"},
    )
    for part in ("allocatable", "capacity"):
        obj["status"][part] |= {NPU_CORE: "16", "huawei.com/Ascend310P": "2"}
    base = {chip: {"IP": "", "SuperDeviceID": 0} for chip in CHIPS.split(",")}
    obj["metadata"]["annotations"] = {
        "huawei.com/Ascend310P": CHIPS,
        "baseDeviceInfos": json.dumps(base),
    }
    return obj


def device_list(name: str, unhealthy: str) -> dict[str, Any]:
    """ClusterD's ``cluster-info-device-0``, listing ``name``'s chips."""
    listed = {
        f"mindx-dl-deviceinfo-{name}": {
            "DeviceList": {
                "huawei.com/Ascend310P": CHIPS,
                "huawei.com/Ascend310P-Unhealthy": unhealthy,
            },
            "UpdateTime": 1_700_000_000,
        }
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "cluster-info-device-0",
            "namespace": "mindx-dl",
            "labels": {"mx-consumer-volcano": "true"},
        },
        "data": {"cluster-info-device-0": json.dumps(listed)},
    }


def vnpu_pod(name: str, cores: int, namespace: str) -> dict[str, Any]:
    """The user guide's pod: ``ring-controller.atlas: ascend-310P``, ``huawei.com/npu-core``."""
    obj = pod(name, namespace=namespace)
    obj["metadata"]["labels"] = {
        "ring-controller.atlas": "ascend-310P",
        "vnpu-level": "low",
        "vnpu-dvpp": "null",
    }
    obj["spec"]["containers"][0]["resources"] = {
        "requests": {NPU_CORE: str(cores)},
        "limits": {NPU_CORE: str(cores)},
    }
    return obj


async def test_the_chips_clusterd_lists_healthy_reach_the_pod_before_its_binding(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it reads the ConfigMap listings and the writes from the request log")
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(MINDCLUSTER_CONFIG_043)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mindx-dl"}}
    await k8s.create("namespaces", namespace)
    await k8s.create("nodes", npu_node("n1"))
    await k8s.create("configmaps", device_list("n1", CHIPS), namespace="mindx-dl")
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}
    await k8s.create("configmaps", other, namespace=k8s.namespace)
    await k8s.create("pods", vnpu_pod("infer", 8, k8s.namespace), namespace=k8s.namespace)
    async with operator_with_vnpus(k8s, str(conf)):
        await asyncio.sleep(1.0)  # both chips unhealthy: nothing to bind to
        got = await k8s.get("pods", "infer", namespace=k8s.namespace)
        assert not got["spec"].get("nodeName")
        healthier = {"data": device_list("n1", "Ascend310P-0")["data"]}
        await k8s.patch("configmaps", "cluster-info-device-0", healthier, namespace="mindx-dl")
        assert await wait_bound(k8s, "infer") == {"infer": "n1"}
    notes = (await k8s.get("pods", "infer", namespace=k8s.namespace))["metadata"]["annotations"]
    assert notes[NPU_CORE] == "1"
    assert notes["predicate-time"].isdigit()
    listed = [r for r in k8s.requests if r.resource == "configmaps" and r.verb in ("list", "watch")]
    assert {r.query.get("labelSelector") for r in listed} == {
        "mx-consumer-volcano=true",
        "mx-consumer-cim=true",
    }
    writes = [
        (r.verb, r.subresource)
        for r in k8s.requests
        if r.name == "infer" and r.verb in ("patch", "create")
    ]
    assert writes.index(("patch", "")) < writes.index(("create", "binding"))
