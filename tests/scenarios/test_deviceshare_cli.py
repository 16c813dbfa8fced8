"""Shared GPUs as users see them: `caldera explain` names each node's cards or HAMi's reason,
`caldera simulate` shows the card assignment and every card's usage, `/metrics` speaks HAMi."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from caldera.cache.state import ClusterState
from caldera.cli import main
from caldera.devices.vendors import VENDORS
from caldera.models.core import Node, Pod, ResourceQuota
from caldera.operator.device_metrics import DeviceCollector

T4 = '"count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-Tesla T4","health":true'
CARDS = f'[{{"id":"GPU-a",{T4}}},{{"id":"GPU-b","index":1,{T4}}}]'
CLUSTER = f"""
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  annotations: {{hami.io/node-nvidia-register: '{CARDS}'}}
status: {{allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}}}
---
apiVersion: v1
kind: Node
metadata:
  name: gpu-2
  annotations: {{hami.io/node-nvidia-register: 'not a registration'}}
status: {{allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}}}
---
apiVersion: v1
kind: Node
metadata: {{name: cpu-1}}
status: {{allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}}}
"""
POLICY = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
"""


def gpu_pod(name: str, gpus: int, memory: int) -> str:
    limits = f'{{nvidia.com/gpu: "{gpus}", nvidia.com/gpumem: "{memory}"}}'
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: x, resources: {{limits: {limits}}}}}]
"""


def files(tmp_path: Path, *pods: str) -> list[str]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("---".join([CLUSTER, *pods]))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return [str(cluster), "--policy", str(policy)]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    main([*argv, "--output", "json"])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_explain_names_the_cards_a_fitting_node_would_give_and_why_others_give_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = run_json(capsys, "explain", "default/p", *files(tmp_path, gpu_pod("p", 2, 9000)))
    nodes = doc["nodes"]
    # two idle cards: HAMi's walk takes the last registered first
    assert nodes["gpu-1"]["devices"] == "GPU-b (9000 MiB, 0% cores), GPU-a (9000 MiB, 0% cores)"
    assert nodes["cpu-1"]["reasons"] == {"deviceshare": ["1/0 NodeInsufficientDevice"]}
    assert nodes["gpu-2"]["reasons"]["deviceshare"] == [
        (
            "metadata.annotations[hami.io/node-nvidia-register] cannot be read: "
            "device 0: expected 7 or 9 comma-separated fields, not 1"
        )
    ]
    assert doc["verdict"] == "bound to gpu-1"


def test_explain_gives_hamis_per_node_reason_when_no_card_has_room(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = run_json(capsys, "explain", "default/p", *files(tmp_path, gpu_pod("p", 1, 17000)))
    assert doc["nodes"]["gpu-1"]["reasons"] == {
        "deviceshare": [
            (
                "2/2 CardInsufficientMemory "
                "(GPU-a: CardInsufficientMemory; GPU-b: CardInsufficientMemory)"
            )
        ]
    }
    assert "2 CardInsufficientMemory" not in doc["verdict"]  # one node, not two
    assert "1 CardInsufficientMemory" in doc["verdict"]


def test_simulate_shows_the_assignment_and_every_cards_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = files(tmp_path, gpu_pod("a", 1, 12000), gpu_pod("b", 1, 6000))
    doc = run_json(capsys, "simulate", *argv)
    assert doc["pods"]["default/a"]["annotations"]["hami.io/vgpu-devices-allocated"] == (
        "GPU-b,NVIDIA,12000,0:;"
    )
    # spread: b goes to the emptier card
    assert doc["pods"]["default/b"]["annotations"]["hami.io/vgpu-devices-allocated"] == (
        "GPU-a,NVIDIA,6000,0:;"
    )
    used = {d["id"]: (d["slots"]["used"], d["memoryMiB"]["used"]) for d in doc["devices"]}
    assert used == {"GPU-a": (1, 6000), "GPU-b": (1, 12000)}
    main(["simulate", *argv])
    table = capsys.readouterr().out
    assert "== shared devices after the last cycle ==" in table
    assert "gpu-1  GPU-b  NVIDIA-Tesla T4  1/10   12000/16000  0/100" in table
    # the unreadable registration is reported, naming the node and the annotation
    assert "Node gpu-2: metadata.annotations[hami.io/node-nvidia-register]" in table


def _node(name: str, annotations: dict[str, str]) -> Node:
    return Node.model_validate({"metadata": {"name": name, "annotations": annotations}})


def _holder(name: str, allocated: str, phase: str = "Running") -> Pod:
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "team",
                "annotations": {
                    "hami.io/vgpu-node": "gpu-1",
                    "hami.io/vgpu-devices-allocated": allocated,
                },
            },
            "spec": {"nodeName": "gpu-1", "containers": [{"name": "c"}]},
            "status": {"phase": phase},
        }
    )


def test_metrics_use_hamis_names_and_units() -> None:
    state = ClusterState()
    state.add(_node("gpu-1", {"hami.io/node-nvidia-register": CARDS}))
    state.add(_holder("a", "GPU-a,NVIDIA,3000,30:;"))
    state.add(_holder("b", "GPU-a,NVIDIA,1000,10:;"))
    state.add(_holder("done", "GPU-b,NVIDIA,9000,50:;", phase="Succeeded"))
    state.add(
        ResourceQuota.model_validate(
            {
                "metadata": {"name": "gpus", "namespace": "team"},
                "spec": {"hard": {"limits.nvidia.com/gpumem": "8000"}},
            }
        )
    )
    samples = scrape(DeviceCollector(lambda: state, lambda: VENDORS))
    card_a = {"node": "gpu-1", "device_uuid": "GPU-a", "device_index": "0"}
    card_a["device_type"] = "NVIDIA-Tesla T4"
    card_b = {**card_a, "device_uuid": "GPU-b", "device_index": "1"}
    assert samples[("hami_gpu_shared_count", frozen(card_a))] == 2
    assert samples[("hami_gpu_core_allocated_ratio", frozen(card_a))] == 40
    assert samples[("hami_gpu_memory_limit_bytes", frozen(card_a))] == 16000 * MIB
    assert samples[("hami_gpu_shared_count", frozen(card_b))] == 0  # Succeeded holds nothing
    quota = {"namespace": "team", "quota_name": "nvidia.com/gpumem"}
    assert samples[("hami_resource_quota_limit", frozen(quota))] == 8000 * MIB
    assert samples[("hami_resource_quota_used", frozen({**quota, "limit": str(8000 * MIB)}))] == (
        4000 * MIB
    )
    share = {"namespace": "team", "node": "gpu-1", "pod": "a", "container_index": "0"}
    share["device_uuid"] = "GPU-a"
    assert samples[("hami_vgpu_memory_allocated_bytes", frozen(share))] == 3000 * MIB


MIB = 1024 * 1024


def frozen(labels: dict[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def scrape(collector: DeviceCollector) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozen(sample.labels)): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_no_device_metrics_while_the_policy_shares_no_devices() -> None:
    state = ClusterState()
    state.add(_node("gpu-1", {"hami.io/node-nvidia-register": CARDS}))
    assert scrape(DeviceCollector(lambda: state, lambda: ())) == {}


def test_the_shipped_gpu_example_runs_under_the_shipped_gpu_policy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = Path(__file__).resolve().parents[2]
    argv = [str(root / "examples" / "gpu-sharing"), "--policy"]
    doc = run_json(capsys, "simulate", *argv, str(root / "policies" / "hami-gpu-sharing.yaml"))
    nodes = {b["pod"]: b["node"] for b in doc["binds"]}
    # the gang packs onto one A100 node (binpack), the T4-only pods onto the T4 node
    assert {nodes[f"default/finetune-{i}"] for i in range(4)} == {"gpu-1"}
    assert nodes["default/inference-0"] == nodes["default/inference-1"] == "gpu-3"
    # a pod asking only for a GPU still gets its turn in a queue already at its share, and
    # says in HAMi's words why no card takes it
    assert doc["unschedulable"] == {
        "default/too-big": (
            "0/4 nodes are available: 1 CardCordoned, 1 NodeInsufficientDevice, "
            "3 CardInsufficientMemory."
        )
    }


def test_simulate_reads_namespace_quotas_from_manifests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quota = """
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu, namespace: default}
spec: {hard: {limits.nvidia.com/gpumem: "10000"}}
"""
    argv = files(tmp_path, quota, gpu_pod("a", 2, 4000), gpu_pod("b", 1, 3000))
    doc = run_json(capsys, "simulate", *argv)
    # a takes 8000 of the 10,000 MiB (counted per card); b's 3000 would pass the limit
    assert [b["pod"] for b in doc["binds"]] == ["default/a"]
    assert doc["unschedulable"]["default/b"] == (
        "0/3 nodes are available: 1 ResourceQuotaNotFit, 2 NodeInsufficientDevice."
    )
