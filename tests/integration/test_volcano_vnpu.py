"""Volcano's HAMi vNPUs end to end in the operator: the device ConfigMap the policy names
(``deviceshare.KnownGeometriesCMName``) reaches the session through an informer of its own, by
field selector (no other ConfigMap listed), an edit to it counts from the next session, and the
NPU reaches the pod as Volcano's ``CreateAnnotations`` writes it before the binding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emulator.handles import K8sHandle
from integration.harness import node, pod, wait_bound
from integration.test_mindcluster import operator_with_vnpus

CONFIG_042 = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.AscendHAMiVNPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.KnownGeometriesCMNamespace: kube-system
      deviceshare.KnownGeometriesCMName: hami-scheduler-device
"""
COUNT, MEMORY = "huawei.com/Ascend910B3", "huawei.com/Ascend910B3-memory"


def device_config(template: str) -> dict[str, Any]:
    """HAMi's device ConfigMap with one 910B3 card type of one template."""
    text = f"""vnpus:
  configs:
  - {{chipName: 910B3, commonWord: Ascend910B3, resourceName: {COUNT},
     resourceMemoryName: {MEMORY}, memoryAllocatable: 65536,
     memoryCapacity: 65536, aiCore: 20, templates: [{{name: {template}, memory: 32768}}]}}
"""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "hami-scheduler-device", "namespace": "kube-system"},
        "data": {"device-config.yaml": text},
    }


def npu_node(name: str) -> dict[str, Any]:
    """A node with one 910B3 NPU, as HAMi's Ascend device plugin registers it."""
    obj = node(name, cpu="32", memory="128Gi")
    for part in ("allocatable", "capacity"):
        obj["status"][part] |= {COUNT: "4"}
    registration = [{"id": f"{name}-0", "count": 4, "devmem": 65536, "devcore": 20}]
    obj["metadata"]["annotations"] = {"hami.io/node-register-Ascend910B3": json.dumps(registration)}
    return obj


def npu_pod(name: str, namespace: str) -> dict[str, Any]:
    obj = pod(name, namespace=namespace)
    obj["spec"]["containers"][0]["resources"] = {"limits": {COUNT: "1", MEMORY: "20000"}}
    return obj


async def test_the_device_configmap_the_policy_names_gives_the_templates(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    k8s.needs_emulator("it reads the ConfigMap listings from the request log")
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONFIG_042)
    await k8s.create("nodes", npu_node("n1"))
    await k8s.create("configmaps", device_config("vir10_3c_32g"), namespace="kube-system")
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}
    await k8s.create("configmaps", other, namespace=k8s.namespace)
    await k8s.create("pods", npu_pod("first", k8s.namespace), namespace=k8s.namespace)
    async with operator_with_vnpus(k8s, str(conf)):
        assert await wait_bound(k8s, "first") == {"first": "n1"}
        edited = {"data": device_config("renamed_32g")["data"]}
        await k8s.patch("configmaps", "hami-scheduler-device", edited, namespace="kube-system")
        await k8s.create("pods", npu_pod("second", k8s.namespace), namespace=k8s.namespace)
        assert await wait_bound(k8s, "second") == {"second": "n1"}
    said = {}
    for name in ("first", "second"):
        got = await k8s.get("pods", name, namespace=k8s.namespace)
        said[name] = json.loads(got["metadata"]["annotations"][COUNT])
    assert said == {
        "first": [{"UUID": "n1-0", "temp": "vir10_3c_32g"}],
        "second": [{"UUID": "n1-0", "temp": "renamed_32g"}],
    }
    listed = [r for r in k8s.requests if r.resource == "configmaps" and r.verb in ("list", "watch")]
    fields = {r.query.get("fieldSelector") for r in listed} - {None}
    assert fields == {"metadata.namespace=kube-system,metadata.name=hami-scheduler-device"}
