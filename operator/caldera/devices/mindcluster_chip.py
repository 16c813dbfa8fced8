"""The pieces of MindCluster's 310P vNPUs: AI core and CPU counts, templates, chips, pods.

Volcano's ``pkg/scheduler/api/devices/ascend/mindcluster/ascend310p/vnpu`` (``type.go``,
``utils.go``, ``device_manage.go``) at ed72c7c8: the names, templates and per-chip checks that
:mod:`caldera.devices.mindcluster` decides with. Each function names the Go one it follows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "ASCEND_310P",
    "ASCEND_REAL",
    "DEVICE_NAME",
    "DVPP_NULL",
    "EMPTY",
    "HW_PREFIX",
    "NODED_STATUS",
    "NPU_CORE",
    "PREDICATE_TIME",
    "TEMPLATES_310P",
    "MindClusterError",
    "NpuPod",
    "VChip",
    "VResource",
    "asks",
    "atoi",
    "chip_id",
    "downgradable",
    "downgrade",
    "labelled_template",
    "read_pod",
    "template_named",
    "template_of",
]

DEVICE_NAME = "ascend310p-vNPU"
"""The device name Volcano registers (``vnpu.DeviceName``)."""
NPU_CORE = "huawei.com/npu-core"
"""The resource a pod asks AI cores by, and the pod annotation naming its chips."""
ASCEND_REAL = "huawei.com/AscendReal"
"""The device plugin's pod annotation naming the vNPU it made (``Ascend310P-2c.1cpu-105-0_3``)."""
PREDICATE_TIME = "predicate-time"
HW_PREFIX = "huawei.com/"
RING_LABEL, RING_310P = "ring-controller.atlas", "ascend-310P"
LEVEL_LABEL, LEVEL_LOW, LEVEL_HIGH = "vnpu-level", "low", "high"
DVPP_LABEL, DVPP_ON, DVPP_OFF, DVPP_NULL = "vnpu-dvpp", "yes", "no", "null"
NODED_STATUS = "nodedNodeHealtyStatus"
"""The node annotation key Volcano keeps NodeD's node status under (its spelling)."""
ASCEND_310P = "Ascend310P"


class VResource(NamedTuple):
    """AI cores, AI CPUs and the DVPP word (``VResource``; ``""`` is Go's zero value)."""

    aicore: int
    aicpu: int
    dvpp: str = ""

    def plus(self, other: VResource) -> VResource:
        """``Add``: cores and CPUs; the DVPP word stays."""
        return VResource(self.aicore + other.aicore, self.aicpu + other.aicpu, self.dvpp)

    def minus(self, other: VResource) -> VResource:
        """``Sub``."""
        return VResource(self.aicore - other.aicore, self.aicpu - other.aicpu, self.dvpp)

    def covers(self, other: VResource) -> bool:
        """``BeGreater``: at least as many cores and CPUs."""
        return self.aicore >= other.aicore and self.aicpu >= other.aicpu

    def go(self) -> str:
        """Go's ``%#v`` of the value, as the refusal messages print it."""
        return f'vnpu.VResource{{Aicore:{self.aicore}, Aicpu:{self.aicpu}, DVPP:"{self.dvpp}"}}'


EMPTY = VResource(0, 0)
"""Go's zero ``VResource``."""

TEMPLATES_310P: Mapping[str, VResource] = {
    "vir01": VResource(1, 1, DVPP_NULL),
    "vir02": VResource(2, 2, DVPP_NULL),
    "vir02_1c": VResource(2, 1, DVPP_NULL),
    "vir04": VResource(4, 4, DVPP_NULL),
    "vir04_3c": VResource(4, 3, DVPP_NULL),
    "vir04_3c_ndvpp": VResource(4, 3, DVPP_OFF),
    "vir04_4c_dvpp": VResource(4, 4, DVPP_ON),
}
"""``NewNPUDevices``' ``VT.Data``: the templates a 310P pod is fitted and written by."""


class MindClusterError(ValueError):
    """An allocation or a pod's labels Volcano refuses; the message is Volcano's."""


@dataclass(frozen=True, slots=True)
class NpuPod:
    """What the vNPU code reads of a pod."""

    uid: str
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    cores: int = 0
    """``getAiCoreNumFromPod``: the first app container's non-zero ``huawei.com/npu-core``
    request, rounded up (``Quantity.Value``); 0 when none."""
    limited: bool = False
    """An app container names ``huawei.com/npu-core`` in its limits."""
    npu_task: bool = False
    """The pod's request names a ``huawei.com/`` resource (``isNPUTask``)."""
    counted: bool = True
    """The node's ``AddTask`` adds its devices (not Releasing or Pipelined)."""
    namespace: str = ""
    active: bool = True
    """Not Succeeded or Failed."""


def read_pod(
    uid: str,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    containers: Sequence[tuple[Mapping[str, float], Mapping[str, float]]],
    requested: Sequence[str] = (),
    *,
    counted: bool = True,
    namespace: str = "",
    active: bool = True,
) -> NpuPod:
    """An :class:`NpuPod` from the app containers' (requests, limits) and the names of the
    resources the pod requests (``requested``, ``Resreq``)."""
    cores = next((math.ceil(r[NPU_CORE]) for r, _ in containers if r.get(NPU_CORE)), 0)
    limited = any(NPU_CORE in limits for _, limits in containers)
    npu_task = any(HW_PREFIX in n for n in requested)
    return NpuPod(
        uid, name, labels, annotations, cores, limited, npu_task, counted, namespace, active
    )


def asks(pod: NpuPod) -> bool:
    """``HasDeviceRequest`` (``checkVNPUResourcesInPod``), with the feature on."""
    return pod.labels.get(RING_LABEL) == RING_310P and pod.limited


def template_of(cores: int, level: str, dvpp: str) -> str:
    """``getResTemplateFromTaskSetting`` and ``getVirTemplate``; "" for another core count."""
    if cores == 1:
        return "vir01"
    if cores == 2:
        return "vir02_1c" if level == LEVEL_LOW else "vir02"
    if cores == 4:
        if dvpp == DVPP_ON:
            return "vir04_4c_dvpp"
        if dvpp == DVPP_OFF:
            return "vir04_3c_ndvpp"
        return "vir04_3c" if level == LEVEL_LOW else "vir04"
    return ""


def labelled_template(cores: int, labels: Mapping[str, str]) -> VResource:
    """The vNPU a pod asks for (``GetPodResource`` past whole chips): ``vnpu-dvpp`` (yes, no or
    null, the default; ``GetVTaskDVPP``) and ``vnpu-level`` (low, the default for any other
    word, or high; ``GetVTaskLevel``); :data:`EMPTY` for a core count no template has."""
    dvpp = labels.get(DVPP_LABEL, DVPP_NULL)
    if dvpp not in (DVPP_OFF, DVPP_NULL, DVPP_ON):
        raise MindClusterError(f"err dvpp value:{dvpp}")
    level = labels.get(LEVEL_LABEL, LEVEL_LOW)
    if level not in (LEVEL_LOW, LEVEL_HIGH):
        level = LEVEL_LOW
    return TEMPLATES_310P.get(template_of(cores, level, dvpp), EMPTY)


def downgradable(res: VResource) -> bool:
    """``taskAICPUCanBeDowngrade``."""
    if res.aicore == 2 and res.aicpu == 2:
        return True
    return res.aicore == 4 and res.aicpu == 4 and res.dvpp != DVPP_ON


def downgrade(res: VResource) -> VResource:
    """``downgradeTaskAICPU``: 2 cores keep 1 CPU, 4 cores keep 3."""
    if res.aicore == 2:
        return VResource(2, 1, res.dvpp)
    if res.aicore == 4:
        return VResource(4, 3, res.dvpp)
    return res


def atoi(text: str) -> int | None:
    """Go's ``strconv.Atoi``: an optional sign and ASCII digits; None otherwise."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits.isascii() or not digits.isdigit():
        return None
    return int(text)


@dataclass(slots=True)
class VChip:
    """One chip and what is cut of it (``VChip``)."""

    name: str
    """``<kind>-<id>``, e.g. ``Ascend310P-0``."""
    kind: str
    core_num: int
    total: VResource
    used: VResource
    free: VResource
    segmented: bool = False
    """A vNPU was cut of it (``SegmentFlag``): it takes no whole-chip request."""
    unstable: bool = False
    """A pod on it has no ``huawei.com/AscendReal`` yet: it takes no vNPU."""
    dual: bool = False
    real_ids: list[str] = field(default_factory=list)
    pods: set[str] = field(default_factory=set)

    def update_dvpp(self, word: str) -> None:
        """``UpdateDVPP``."""
        if word == DVPP_ON:
            self.used, self.free = (
                self.used._replace(dvpp=DVPP_ON),
                self.free._replace(dvpp=DVPP_OFF),
            )
        if word == DVPP_OFF and self.used.dvpp == DVPP_OFF:
            self.used, self.free = (
                self.used._replace(dvpp=DVPP_OFF),
                self.free._replace(dvpp=DVPP_ON),
            )
        if word == DVPP_NULL and self.used.dvpp != DVPP_ON:
            self.used = self.used._replace(dvpp=DVPP_NULL)
            self.free = self.free._replace(dvpp=DVPP_NULL)

    def reset_dvpp(self, word: str) -> None:
        """``ResetDVPP``."""
        if word == DVPP_ON:
            self.used, self.free = (
                self.used._replace(dvpp=DVPP_OFF),
                self.free._replace(dvpp=DVPP_ON),
            )

    def groups(self) -> list[int]:
        """``getVGroups``: the distinct vGroup numbers after the last ``_`` of the real ids."""
        out: list[int] = []
        for real in self.real_ids:
            parts = real.split("_")
            if len(parts) < 2:
                continue
            group = atoi(parts[-1])
            if group is not None and group not in out:
                out.append(group)
        return out

    def meets(self, res: VResource) -> bool:
        """``isChipMeetResReq``: enough free, vGroups left (``isChipVGroupValid``) and DVPP
        (``isChipDVPPValid``)."""
        if not self.free.covers(res):
            return False
        if self.kind == ASCEND_310P and self.segmented:
            groups = len(self.groups())
            if (groups == 3 and res.aicore >= 4) or (groups == 4 and res.aicore >= 2):
                return False
        if res.dvpp == DVPP_ON and self.free.dvpp != DVPP_ON:
            return False
        return not (res.dvpp == DVPP_NULL and self.free.dvpp == DVPP_OFF)


def chip_id(name: str) -> int:
    """``getWholeCardIDFromAscendReal``: the number after the first ``-``."""
    parts = name.split("-")
    if len(parts) < 2:
        raise MindClusterError(f"getCardIDFromCardNameStr {name} format incorrect")
    number = atoi(parts[1])
    if number is None:
        raise MindClusterError(
            f'getCardIDFromCardNameStr {name} strconv.Atoi: parsing "{parts[1]}": invalid syntax'
        )
    return number


def template_named(res: VResource) -> str:
    """``GetTemplateByResReq``: the 310P template that is exactly ``res``."""
    for name, value in TEMPLATES_310P.items():
        if value == res:
            return name
    raise MindClusterError(f"{res.go()} not get template")
