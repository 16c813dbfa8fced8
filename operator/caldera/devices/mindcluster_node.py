"""A node's MindCluster vNPU state as a Volcano session opens (``InitVNPUDevice``).

Volcano's ``pkg/scheduler/plugins/deviceshare/devices/ascend/310p/vnpu/init_policy.go`` at
ed72c7c8, on the session's copy of the scheduler cache's device:

1. the cache has counted every pod it holds on the node that asks for vNPUs and carries
   ``huawei.com/npu-core`` (``AddResource``): the template each holds and its value, but no chip
   (the cache never sets chips up);
2. a node with a ``huawei.com/`` capacity takes its labels, idle resources and annotations, with
   NodeD's status under ``nodedNodeHealtyStatus`` ("Healthy" when NodeD reported nothing) and the
   device list on top (``syncAnnotation``, ``updateNPUNodeDeviceInfos``);
3. ``setNodeVNPUInfo``: ``huawei.com/npu-core`` capacity, the ``accelerator`` label's chip kind
   (``huawei-Ascend310P``), the ``servertype`` label's cores per chip (``Ascend310P-8``), the
   ``node.kubernetes.io/npu.chip.name`` label, the ``huawei.com/<kind>`` annotation, AI CPUs per
   chip from the node templates; then one chip per free chip of ``huawei.com/<kind>`` and what
   each pod on the node holds, by its ``huawei.com/npu-core`` annotation (``initVChips``). The
   node is valid once all of this is read; a step that fails leaves it invalid, the fields set
   so far kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from caldera.devices.mindcluster import NpuNode
from caldera.devices.mindcluster_chip import (
    ASCEND_310P,
    ASCEND_REAL,
    DVPP_NULL,
    HW_PREFIX,
    NODED_STATUS,
    NPU_CORE,
    TEMPLATES_310P,
    NpuPod,
    VChip,
    VResource,
    asks,
    atoi,
)
from caldera.devices.mindcluster_info import (
    BASE_DEVICE_INFOS,
    ClusterInfo,
    DeviceInfo,
    InitParams,
    available,
)

__all__ = ["JOB_TEMPLATES", "NODE_ANNOTATIONS", "NodeInputs", "open_node", "session_node"]

ACCELERATOR, SERVER_TYPE, CHIP_TYPE = (
    "accelerator",
    "servertype",
    "node.kubernetes.io/npu.chip.name",
)
HEALTHY = "Healthy"
UNHEALTHY_SUFFIX = "-Unhealthy"
NODE_ANNOTATIONS = frozenset(
    {
        BASE_DEVICE_INFOS,
        *(
            f"{HW_PREFIX}{kind}{suffix}"
            for kind in ("Ascend910", ASCEND_310P, "Ascend310")
            for suffix in ("", UNHEALTHY_SUFFIX)
        ),
    }
)
"""The node annotations a session reads: ``baseDeviceInfos`` and the device plugin's free and
unhealthy chips of each chip kind (``huawei.com/Ascend310P``; the kinds ``GetDeviceType``
knows). The operator's cache keeps a node's record current when one of them changes."""
_DVPP_OFF, _DVPP_ON = "no", "yes"


def _null(aicore: int, aicpu: int) -> VResource:
    return VResource(aicore, aicpu, DVPP_NULL)


_910B12 = {
    "vir06_1c_16g": _null(6, 1),
    "vir03_1c_8g": _null(3, 1),
    "vir12_3c_32g": _null(12, 3),
}
JOB_TEMPLATES: Mapping[str, Mapping[str, VResource]] = {
    ASCEND_310P: TEMPLATES_310P,
    "Ascend910": {
        "vir02": _null(2, 1),
        "vir04": _null(4, 1),
        "vir08": _null(8, 3),
        "vir16": _null(16, 7),
    },
    "910B1": _910B12,
    "910B2C": _910B12,
    "910B2": _910B12,
    "910B3": {"vir05_1c_16g": _null(5, 1), "vir10_3c_32g": _null(10, 3)},
    "910B4": {
        "vir05_1c_8g": _null(5, 1),
        "vir10_3c_16g_nm": VResource(10, 3, _DVPP_OFF),
        "vir10_4c_16g_m": VResource(10, 4, _DVPP_ON),
        "vir10_3c_16g": _null(10, 3),
    },
}
"""``initVolcanoFrameFromSsn``'s ``VJobTemplate``: what a held template counts, per chip kind
(310P) or chip type (the others)."""

NODE_TEMPLATES: tuple[tuple[str, int, int], ...] = (
    (ASCEND_310P, 8, 7),
    ("910B1", 25, 6),
    ("910B2C", 24, 6),
    ("910B3", 20, 6),
    ("910B4", 20, 6),
    ("910B2", 24, 6),
    (ASCEND_310P, 10, 7),
)
"""``initTemplate``: (chip kind or type, AI cores, AI CPUs) of one chip."""


@dataclass(frozen=True, slots=True)
class NodeInputs:
    """What the session reads of the Node object."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    capacity: Mapping[str, float]
    """``status.capacity``'s ``huawei.com/`` resources, in whole units."""


def open_node(
    node: NodeInputs,
    pods: Sequence[NpuPod],
    cluster: ClusterInfo,
    params: InitParams,
    now: float,
) -> NpuNode:
    """``InitVNPUDevice`` for one node: its device list as the ConfigMaps give it and Volcano
    works it out (``GetDeviceInfoAndSetInformerStart``), NodeD's status (``GetNodeDInfo``)."""
    base = node.annotations.get(BASE_DEVICE_INFOS)
    info = available(cluster.device_info(node.name), base, pods, params.self_maintain, now)
    return session_node(node, pods, info, cluster.node_status(node.name))


def session_node(
    node: NodeInputs, pods: Sequence[NpuPod], info: DeviceInfo, node_status: str
) -> NpuNode:
    """The node's state for a session: ``pods`` are the node's pods, ``info`` its device list
    (after :func:`~caldera.devices.mindcluster_info.available`), ``node_status`` NodeD's."""
    out = NpuNode(node.name)
    for pod in pods:
        if pod.counted and asks(pod):
            out.add(pod, pod.annotations)
    if not any(HW_PREFIX in name for name in node.capacity):
        return out  # "npu resource is not enable": the node keeps no idle, labels or annotations
    out.labels = node.labels
    out.idle_known = True
    annotations = dict(node.annotations)
    annotations[NODED_STATUS] = node_status or HEALTHY
    if info.update_time > 0:  # updateNPUNodeDeviceInfos: newer than the copy's, always 0
        # a free-chip key is merged with the old list only when the list is at most 10 s newer
        # than that 0 (getRealHealthyDeviceList): never, for Unix times
        annotations.update(info.devices)
    out.annotations = annotations
    if _set_up(out, node.capacity.get(NPU_CORE, 0.0)):
        _chips(out, pods)
        out.valid = True
    return out


def _set_up(out: NpuNode, capacity: float) -> bool:
    """``setNodeVNPUInfo`` before the chips: ``setChipPropertiesFromNPUNode`` and
    ``setTotalResAndChipNumByTemplates``."""
    if capacity <= 0:  # checkDyVNodeResourceInitialized
        return False
    kind = out.labels.get(ACCELERATOR, "").split("-")  # GetChipKindFromNpuNode
    if ACCELERATOR not in out.labels or len(kind) < 2:
        return False
    out.chip_kind = kind[1]
    if SERVER_TYPE not in out.labels:
        return False
    out.server_type = out.labels[SERVER_TYPE]
    if CHIP_TYPE not in out.labels:
        return False
    out.chip_type = out.labels[CHIP_TYPE]
    free = out.annotations.get(HW_PREFIX + out.chip_kind)
    if free is None:
        return False
    out.free_chip_num = len(free.split(","))
    out.total = VResource(int(capacity), 0)
    per = out.cores_per_chip()
    if not per:
        return False
    out.ai_core_per_chip = per
    chips, rest = divmod(out.total.aicore, per)  # getTotalChipNum
    if rest != 0 or chips == 0:
        return False
    out.total_chip_num = chips
    cpu = -1  # getCpuNumPerChip: the last template that matches
    for kind_or_type, cores, cpus in NODE_TEMPLATES:
        if kind_or_type in (out.chip_kind, out.chip_type) and cores * chips == out.total.aicore:
            cpu = cpus
    if cpu == -1:
        return False
    out.total = VResource(out.total.aicore, cpu * chips, _DVPP_OFF)
    return True


def _chip_total(out: NpuNode) -> VResource:
    """``getVChipTotalRes``."""
    chips = out.total_chip_num
    return VResource(out.total.aicore // chips, out.total.aicpu // chips, _DVPP_OFF)


def new_chip(out: NpuNode, chip: int, total: VResource) -> VChip:
    """``NewVChip``: nothing used, DVPP free."""
    return VChip(
        name=f"{out.chip_kind}-{chip}",
        kind=out.chip_kind,
        core_num=out.ai_core_per_chip,
        total=total._replace(dvpp=_DVPP_OFF),
        used=VResource(0, 0, _DVPP_OFF),
        free=total._replace(dvpp=_DVPP_ON),
        dual=out.server_type.startswith("dual"),
    )


def _chip_ids(out: NpuNode, suffix: str) -> list[int]:
    """``getCardIDsFromNodeAndDeviceInfo``: ``Ascend310P-0,...`` in
    ``huawei.com/<kind><suffix>``."""
    ids = []
    for name in out.annotations.get(HW_PREFIX + out.chip_kind + suffix, "").split(","):
        number = atoi(name.removeprefix(out.chip_kind + "-"))
        if name and number is not None:
            ids.append(number)
    return ids


def _chips(out: NpuNode, pods: Sequence[NpuPod]) -> None:
    """``initVChips``: the free chips, the unhealthy ones, and what the pods hold."""
    total = _chip_total(out)
    for chip in _chip_ids(out, ""):  # createNodeNewVChips
        out.chips[chip] = new_chip(out, chip, total)
    out.unhealthy.update(_chip_ids(out, UNHEALTHY_SUFFIX))
    for pod in pods:
        value = pod.annotations.get(NPU_CORE)
        if not pod.npu_task or value is None:
            continue
        if any("-" not in part for part in value.split(",")):  # isPodWholeCardFromAscendCore
            _hold_whole(out, pod, value, total)
        else:
            _hold_vnpu(out, pod, value, total)


def _chip(out: NpuNode, chip: int, total: VResource, pod: NpuPod) -> VChip:
    """The chip a pod holds, made when the device list did not name it free."""
    vchip = out.chips.get(chip)
    if vchip is None:
        vchip = out.chips[chip] = new_chip(out, chip, total)
    vchip.unstable = vchip.unstable or not pod.annotations.get(ASCEND_REAL)  # IsPodResUnstable
    return vchip


def _hold_whole(out: NpuNode, pod: NpuPod, value: str, total: VResource) -> None:
    """``addNPUResourceWholeCard``: ``0,1`` takes chips 0 and 1 whole."""
    ids = [atoi(part) for part in value.split(",")]
    chips = [chip for chip in ids if chip is not None]
    if len(chips) != len(ids):  # getCardPhysicsIDFromAscendCore fails: the pod is passed over
        return
    for chip in chips:
        if chip in out.unhealthy:
            continue
        vchip = _chip(out, chip, total, pod)
        vchip.real_ids.append(str(chip))
        vchip.pods.add(pod.uid)
        vchip.used, vchip.free = vchip.used.plus(total), vchip.free.minus(total)


def _hold_vnpu(out: NpuNode, pod: NpuPod, value: str, total: VResource) -> None:
    """``addNPUResourceVNPUCard``: ``0-vir04`` takes template vir04 of chip 0."""
    parts = value.split("-")
    chip = atoi(parts[0]) if len(parts) == 2 else None
    if chip is None:
        return
    if chip in out.unhealthy:
        return
    vchip = _chip(out, chip, total, pod)
    real = pod.annotations.get(ASCEND_REAL, "")
    if real:
        vchip.real_ids.append(real)
    vchip.pods.add(pod.uid)
    vchip.segmented = True
    templates = JOB_TEMPLATES.get(out.chip_kind if out.chip_kind == ASCEND_310P else out.chip_type)
    held = None if templates is None else templates.get(parts[1])  # getPodUsedRes
    if held is None:
        return
    vchip.used, vchip.free = vchip.used.plus(held), vchip.free.minus(held)
    vchip.update_dvpp(held.dvpp)
