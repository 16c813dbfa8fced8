"""Ascend 310P vNPUs the MindCluster way, end to end: real config 043 (Volcano's
``how_to_use_vnpu.md``) on a 310P node as MindCluster's components label, annotate and size it,
with the user guide's pods, through ``caldera simulate``'s engine: the chips written on the bound
pod (``huawei.com/npu-core``, ``predicate-time``), Volcano's refusals, the ConfigMaps ClusterD,
NodeD and the device plugin write, and ``deviceshare.ScheduleWeight``'s node order."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pytest

from builders import (
    MINDCLUSTER_CONFIG_043,
    REGISTRY,
    Obj,
    binds,
    bound_with,
    new_session,
    node,
    pod,
    podgroup,
    policy,
    state_of,
    task_named,
)
from caldera.api.task import TaskStatus
from caldera.framework.interfaces import EventHandler
from caldera.framework.policy import load_policy
from caldera.framework.session import Session
from caldera.models.core import ConfigMap
from caldera.plugins.deviceshare.mindcluster import MindClusterVNpus
from caldera.simulate.runner import Simulation, simulate

NPU_CORE = "huawei.com/npu-core"
LABELS_310P = {
    "accelerator": "huawei-Ascend310P",
    "servertype": "Ascend310P-8",
    "node.kubernetes.io/npu.chip.name": "310P3",
    "host-arch": "huawei-arm",
}
"""What ``setChipPropertiesFromNPUNode`` reads (the chip kind, 8 AI cores per chip, the chip
type), and the guide's ``nodeSelector``."""
GUIDE = {"app": "infers", "ring-controller.atlas": "ascend-310P", "vnpu-dvpp": "null"}
"""The user guide's task labels, but ``vnpu-level`` (``low`` there)."""


def npu_node(
    name: str = "n1",
    chips: int = 2,
    *,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """A 310P node as MindCluster's device plugin shows it: ``huawei.com/npu-core`` (8 per
    chip) and ``huawei.com/Ascend310P`` allocatable, the free chips in the
    ``huawei.com/Ascend310P`` annotation, every chip in ``baseDeviceInfos``."""
    names = [f"Ascend310P-{i}" for i in range(chips)]
    return node(
        name,
        cpu="32",
        memory="128Gi",
        extra={NPU_CORE: str(8 * chips), "huawei.com/Ascend310P": str(chips)},
        labels={**LABELS_310P, **(labels or {})},
        annotations={
            "huawei.com/Ascend310P": ",".join(names),
            "baseDeviceInfos": json.dumps({n: {"IP": "", "SuperDeviceID": 0} for n in names}),
            **(annotations or {}),
        },
    )


def npu_pod(name: str, cores: int, *, level: str = "low", **more: Any) -> Obj:
    """The guide's pod: its labels, ``huawei.com/npu-core`` requested and limited, the node
    selector."""
    return pod(
        name,
        cpu=None,
        memory=None,
        extra={NPU_CORE: str(cores)},
        limits={NPU_CORE: str(cores)},
        labels={**GUIDE, "vnpu-level": level},
        node_selector={"host-arch": "huawei-arm"},
        **more,
    )


def config_map(namespace: str, name: str, consumer: str, data: Mapping[str, Any]) -> ConfigMap:
    return ConfigMap.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "labels": {consumer: "true"}},
            "data": {k: json.dumps(v) for k, v in data.items()},
        }
    )


def run(
    *objects: Obj,
    config_maps: Iterable[ConfigMap] = (),
    policy_yaml: str = MINDCLUSTER_CONFIG_043,
    cycles: int = 1,
) -> Simulation:
    state = state_of(objects)
    for cm in config_maps:
        state.add(cm)
    return simulate(
        state,
        policy(policy_yaml, REGISTRY),
        REGISTRY,
        scheduler_names=["volcano"],
        cycles=cycles,
    )


def stamp(sim: Simulation) -> str:
    """``predicate-time`` of the first cycle: its time in Unix nanoseconds."""
    return str(int(sim.cycles[0].now * 1_000_000_000))


def pending_message(sim: Simulation, name: str) -> str:
    (condition,) = [c for c in sim.cycles[-1].result.pod_conditions if c.name == name]
    return condition.message


def test_config_043_loads_strictly_and_reads_no_init_params() -> None:
    """The ``...`` ends the document before ``init-params``; written inside it, the entry is
    kept for deviceshare, without a warning (Volcano hands it to the session)."""
    assert policy(MINDCLUSTER_CONFIG_043, REGISTRY).configurations == ()
    inside = load_policy(MINDCLUSTER_CONFIG_043.replace("\n...\n", "\n"), REGISTRY, strict=True)
    assert inside.warnings == ()
    (entry,) = inside.configurations
    assert entry["name"] == "init-params"
    assert entry["arguments"]["presetVirtualDevice"] == "false"


def test_the_user_guides_pod_takes_a_whole_chip_written_on_it_at_bind() -> None:
    """The guide's job (``huawei.com/npu-core: 8``): chip 0 whole (``BuildNPUTopologyAnnotations``
    writes the chip alone), with ``predicate-time``."""
    sim = run(npu_node(), npu_pod("mindx-dls-0", 8))
    assert binds(sim) == {"default/mindx-dls-0": "n1"}
    assert bound_with(sim, "mindx-dls-0") == {NPU_CORE: "0", "predicate-time": stamp(sim)}


def test_vnpus_of_one_template_share_the_least_free_chip() -> None:
    """Four AI cores, ``vnpu-level: low`` and ``vnpu-dvpp: null``: ``vir04_3c``, cut on chip 0,
    then again on chip 0 (``vChipsList``: the least free chip that meets the request)."""
    sim = run(npu_node(), npu_pod("a", 4), npu_pod("b", 4))
    assert binds(sim) == {"default/a": "n1", "default/b": "n1"}
    assert bound_with(sim, "a")[NPU_CORE] == "0-vir04_3c"
    assert bound_with(sim, "b")[NPU_CORE] == "0-vir04_3c"


def test_a_pod_of_another_template_is_refused_with_volcanos_message() -> None:
    """``IsNodeHasDifferentUnFinishedTask``: a node runs one template at a time; Volcano's
    reason is empty there, so its error is the reason."""
    sim = run(npu_node(), npu_pod("a", 4), npu_pod("c", 1, created=1_800_000_000.0))
    assert binds(sim) == {"default/a": "n1"}
    assert pending_message(sim, "c") == "0/1 nodes are available: 1 c is using n1, and not rewrite."


def test_the_guides_second_replica_waits_as_in_volcano() -> None:
    """Whole chips hold no template, so a node holding one refuses every other whole-chip pod
    (``GetTemplateByResReq``), next session too, when the first pod runs with its chip."""
    sim = run(npu_node(), npu_pod("mindx-dls-0", 8), npu_pod("mindx-dls-1", 8), cycles=2)
    assert binds(sim) == {"default/mindx-dls-0": "n1"}
    refused = 'vnpu.VResource{Aicore:8, Aicpu:7, DVPP:"null"} not get template'
    assert pending_message(sim, "mindx-dls-1") == f"0/1 nodes are available: 1 {refused}."


def test_a_running_pods_vnpu_counts_on_its_chip() -> None:
    """A pod the device plugin runs on a vNPU of chip 0 (its ``huawei.com/npu-core`` and
    ``huawei.com/AscendReal``): the session counts it (``initVChips``, ``AddResource``), so the
    next vNPU of its template goes to chip 0 too and another template waits."""
    running = npu_pod(
        "old",
        4,
        node_name="n1",
        annotations={NPU_CORE: "0-vir04_3c", "huawei.com/AscendReal": "Ascend310P-4c.3cpu-100-0_0"},
    )
    sim = run(npu_node(), running, npu_pod("a", 4), npu_pod("c", 1))
    assert binds(sim) == {"default/a": "n1"}
    assert bound_with(sim, "a")[NPU_CORE] == "0-vir04_3c"
    assert pending_message(sim, "c") == "0/1 nodes are available: 1 c is using n1, and not rewrite."


def test_a_request_no_template_fits_is_refused_where_volcano_would_fail_its_allocation() -> None:
    """Three AI cores pass ``FilterNode`` (no template: the empty request) and fail
    ``Allocate`` (``selectChipFromNodeWhole``): refused here by the filter's dry run."""
    sim = run(npu_node(), npu_pod("odd", 3))
    assert binds(sim) == {}
    assert pending_message(sim, "odd") == "0/1 nodes are available: 1 task require card number 0."


def test_clusterd_configmaps_give_the_unhealthy_chips_and_nodeds_verdict() -> None:
    """ClusterD's ``cluster-info-device-*`` (the node's device list: chip 0 unhealthy) and
    ``cluster-info-node-cm`` (NodeD: n2 is being separated), read with config 043's defaults."""
    device = {
        f"mindx-dl-deviceinfo-{name}": {
            "DeviceList": {
                "huawei.com/Ascend310P": "Ascend310P-0,Ascend310P-1",
                "huawei.com/Ascend310P-Unhealthy": "Ascend310P-0" if name == "n1" else "",
            },
            "UpdateTime": 1_700_000_000,
        }
        for name in ("n1", "n2")
    }
    noded = {"mindx-dl-nodeinfo-n2": {"NodeStatus": "PreSeparate", "FaultDevList": []}}
    cms = [
        config_map(
            "mindx-dl",
            "cluster-info-device-0",
            "mx-consumer-volcano",
            {"cluster-info-device-0": device},
        ),
        config_map(
            "mindx-dl",
            "cluster-info-node-cm",
            "mx-consumer-volcano",
            {"cluster-info-node-cm": noded},
        ),
    ]
    sim = run(npu_node("n1"), npu_node("n2"), npu_pod("a", 8), npu_pod("b", 8), config_maps=cms)
    assert binds(sim) == {"default/a": "n1"}
    assert bound_with(sim, "a")[NPU_CORE] == "1"
    assert pending_message(sim, "b") == (
        "0/2 nodes are available: 1 preCheckNodePredicate failure, "
        '1 vnpu.VResource{Aicore:8, Aicpu:7, DVPP:"null"} not get template.'
    )


def test_without_clusterd_the_device_plugins_configmap_is_read() -> None:
    """``useClusterInfoManager: "false"`` (inside the document): the device plugin's
    ``kube-system/mindx-dl-deviceinfo-<node>`` (``mx-consumer-cim``), not ClusterD's."""
    listed = {
        "DeviceInfo": {
            "DeviceList": {
                "huawei.com/Ascend310P": "Ascend310P-0,Ascend310P-1",
                "huawei.com/Ascend310P-Unhealthy": "Ascend310P-0",
            },
            "UpdateTime": 1_700_000_000,
        }
    }
    cim = config_map(
        "kube-system", "mindx-dl-deviceinfo-n1", "mx-consumer-cim", {"DeviceInfoCfg": listed}
    )
    own = MINDCLUSTER_CONFIG_043.replace("\n...\n", "\n").replace(
        '"presetVirtualDevice":"false"}',
        '"presetVirtualDevice":"false","useClusterInfoManager":"false"}',
    )
    assert bound_with(run(npu_node(), npu_pod("a", 8), config_maps=[cim]), "a")[NPU_CORE] == "0"
    sim = run(npu_node(), npu_pod("a", 8), config_maps=[cim], policy_yaml=own)
    assert bound_with(sim, "a")[NPU_CORE] == "1"


@pytest.mark.parametrize(("weight", "chosen"), [(0, "big"), (2, "small")], ids=["0", "2"])
def test_the_schedule_weight_sends_a_pod_to_the_least_idle_node(weight: int, chosen: str) -> None:
    """``ScoreBatchNodes``: 8 to the node with the least idle ``huawei.com/npu-core``, times
    ``deviceshare.ScheduleWeight``; with weight 0 (the default) no score, the first node by
    name."""
    flag = "deviceshare.AscendMindClusterVNPUEnable: true"
    text = MINDCLUSTER_CONFIG_043.replace(
        flag, f"{flag}\n      deviceshare.ScheduleWeight: {weight}"
    )
    sim = run(npu_node("big", 2), npu_node("small", 1), npu_pod("a", 4), policy_yaml=text)
    assert binds(sim) == {"default/a": chosen}


# -- the event handlers, asked directly -----------------------------------------------------

PREDICATES_ONLY = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n'


def watched(objects: list[Obj]) -> tuple[Session, MindClusterVNpus]:
    """An open session whose placements the vNPUs' event handlers are told of."""
    ssn = new_session(objects, PREDICATES_ONLY)
    vnpus = MindClusterVNpus(ssn)
    handler = EventHandler(allocate=vnpus.allocate, deallocate=vnpus.release)
    ssn.event_handlers.add("predicates", handler)
    ssn.open()
    return ssn, vnpus


def test_a_placement_undone_gives_back_the_chips_it_was_given() -> None:
    """``Allocate`` then ``Release`` (a gang discarded): the chips are free again and the bind
    annotations gone, even when the pending pod carries a stale ``huawei.com/npu-core`` (a bind
    that failed after its annotations were written)."""
    stale = {NPU_CORE: "1-vir04_3c"}
    objects = [npu_node(), podgroup("g"), npu_pod("a", 4, group="g", annotations=stale)]
    ssn, vnpus = watched(objects)
    task = task_named(ssn, "a")
    assert vnpus.predicate(task) == []
    ssn.place(task, 0, TaskStatus.ALLOCATED)
    assert task.bind_annotations[NPU_CORE] == "0-vir04_3c"
    chips = vnpus.nodes[0].chips
    assert (chips[0].free.aicore, chips[1].free.aicore) == (4, 8)
    ssn.unplace(task)
    assert task.bind_annotations == {}
    assert (chips[0].free.aicore, chips[1].free.aicore) == (8, 8)
    assert vnpus.nodes[0].concurrent == {}


def test_an_eviction_undone_gives_the_running_pod_its_own_chips_back() -> None:
    """A running pod evicted (``Release`` by its annotation), then put back: it holds chip 0
    again, without new chips or bind annotations (Volcano's ``Allocate`` would pick some)."""
    held = {NPU_CORE: "0", "huawei.com/AscendReal": "0"}
    running = npu_pod("old", 8, group="g", node_name="n1", annotations=held)
    ssn, vnpus = watched([npu_node(), podgroup("g"), running])
    task = task_named(ssn, "old")
    chips = vnpus.nodes[0].chips
    assert chips[0].free.aicore == 0
    ssn.release(task)
    assert chips[0].free.aicore == 8
    ssn.unrelease(task, TaskStatus.RUNNING)
    assert chips[0].free.aicore == 0
    assert task.bind_annotations == {}
    assert vnpus.nodes[0].allocation == {task.uid: "0"}


def test_a_pod_without_the_310p_label_is_no_business_of_the_vnpus() -> None:
    """``HasDeviceRequest``: the ``ring-controller.atlas: ascend-310P`` label and a
    ``huawei.com/npu-core`` limit; the nodes are not even opened for another pod."""
    other = pod("x", group="g", extra={NPU_CORE: "4"}, limits={NPU_CORE: "4"})
    ssn, vnpus = watched([npu_node(), podgroup("g"), other])
    task = task_named(ssn, "x")
    assert vnpus.predicate(task) == []
    assert vnpus.score(task, np.arange(1, dtype=np.intp), weight=1) == 0.0
    assert vnpus._nodes is None
