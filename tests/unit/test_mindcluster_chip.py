"""The pieces of MindCluster's 310P vNPUs: a pod's request, a chip's checks, DVPP words.

Tables built from the branches of Volcano's ``ascend310p/vnpu`` (``utils.go``,
``device_manage.go``) at ed72c7c8; Volcano has no test of its own for them. Each row names the
Go function and branch.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from caldera.devices.mindcluster import NpuNode
from caldera.devices.mindcluster_chip import (
    EMPTY,
    NPU_CORE,
    MindClusterError,
    NpuPod,
    VChip,
    VResource,
    asks,
    read_pod,
)

RING = {"ring-controller.atlas": "ascend-310P"}
HIGH = {"vnpu-level": "high"}
TWO_CHIPS = NpuNode("n1", server_type="Ascend310P-8", total=VResource(16, 14, "no"))
"""A node of two 8-core chips, as ``setNodeVNPUInfo`` leaves it."""


def pod(cores: float, labels: Mapping[str, str]) -> NpuPod:
    resources = {NPU_CORE: float(cores)}
    return read_pod("p", "p", {**RING, **labels}, {}, [(resources, resources)], list(resources))


# -- the pod's request ------------------------------------------------------------------------

REQUESTS = {
    "getResTemplateFromTaskSetting 1 core: vir01": (1, {}, VResource(1, 1, "null")),
    "2 cores, no level label (low): vir02_1c": (2, {}, VResource(2, 1, "null")),
    "2 cores, level high: vir02": (2, HIGH, VResource(2, 2, "null")),
    "GetVTaskLevel: another word is low": (2, {"vnpu-level": "mid"}, VResource(2, 1, "null")),
    "getVirTemplate dvpp yes: vir04_4c_dvpp": (4, {"vnpu-dvpp": "yes"}, VResource(4, 4, "yes")),
    "getVirTemplate dvpp no: vir04_3c_ndvpp": (4, {"vnpu-dvpp": "no"}, VResource(4, 3, "no")),
    "getVirTemplate dvpp null, low: vir04_3c": (4, {"vnpu-dvpp": "null"}, VResource(4, 3, "null")),
    "getVirTemplate dvpp null, high: vir04": (4, HIGH, VResource(4, 4, "null")),
    "getVirTemplate dvpp yes, high: vir04_4c_dvpp": (
        4,
        {**HIGH, "vnpu-dvpp": "yes"},
        VResource(4, 4, "yes"),
    ),
    "getResTemplateFromTaskSetting default: no template": (3, {}, EMPTY),
    "IsResourceWholeCard: 8 cores is one chip": (8, {}, VResource(8, 7, "null")),
    "IsResourceWholeCard: 16 cores, dvpp label not read": (
        16,
        {"vnpu-dvpp": "maybe"},
        VResource(16, 14, "null"),
    ),
    "getAiCoreNumFromPod: 0.5 core rounds up to 1": (0.5, {}, VResource(1, 1, "null")),
}


@pytest.mark.parametrize(("cores", "labels", "want"), REQUESTS.values(), ids=REQUESTS.keys())
def test_a_pod_asks_for_the_template_its_labels_choose(
    cores: float, labels: dict[str, str], want: VResource
) -> None:
    """``GetPodResource`` on a 2-chip node (16 AI cores, 14 AI CPUs)."""
    assert TWO_CHIPS.pod_resource(pod(cores, labels)) == want


def test_a_wrong_dvpp_word_is_an_error_and_an_unset_node_reads_no_request() -> None:
    """``GetVTaskDVPP``'s default branch; ``GetPodResource`` returns the empty request before
    reading labels when the node's total AI cores are 0."""
    with pytest.raises(MindClusterError, match="err dvpp value:maybe"):
        TWO_CHIPS.pod_resource(pod(2, {"vnpu-dvpp": "maybe"}))
    assert NpuNode("n1").pod_resource(pod(2, {"vnpu-dvpp": "maybe"})) == EMPTY


ASKS = {
    "checkVNPUResourcesInPod: label and limit": (RING, {NPU_CORE: 1.0}, True),
    "no ring-controller.atlas label": ({}, {NPU_CORE: 1.0}, False),
    "another ring-controller.atlas value": (
        {"ring-controller.atlas": "ascend-910"},
        {NPU_CORE: 1.0},
        False,
    ),
    "requests only, no limit": (RING, {}, False),
}


@pytest.mark.parametrize(("labels", "limits", "want"), ASKS.values(), ids=ASKS.keys())
def test_a_pod_asks_with_the_310p_label_and_an_npu_core_limit(
    labels: dict[str, str], limits: dict[str, float], want: bool
) -> None:
    """``HasDeviceRequest``."""
    p = read_pod("u", "p", labels, {}, [({NPU_CORE: 1.0}, limits)])
    assert asks(p) is want


def test_the_first_container_with_cores_counts() -> None:
    """``getAiCoreNumFromPod``: a container asking 0 is skipped; none asking is 0."""
    containers = [({NPU_CORE: 0.0}, {}), ({"cpu": 1.0}, {}), ({NPU_CORE: 2.0}, {NPU_CORE: 2.0})]
    assert read_pod("u", "p", RING, {}, containers).cores == 2
    assert read_pod("u", "p", RING, {}, [({"cpu": 1.0}, {})]).cores == 0


# -- the chip's own checks --------------------------------------------------------------------


def chip(free: VResource, real_ids: tuple[str, ...] = (), segmented: bool = True) -> VChip:
    used = VResource(0, 0, "no")
    return VChip(
        "Ascend310P-0", "Ascend310P", 8, free, used, free, segmented, False, False, list(real_ids)
    )


GROUPS3 = tuple(f"Ascend310P-1c.1cpu-10{i}-0_{i}" for i in range(3))
GROUPS4 = (*GROUPS3, "Ascend310P-1c.1cpu-104-0_3")
MEETS = {
    "isChipResourceEnough: too few cores": (
        chip(VResource(3, 7, "yes")),
        VResource(4, 3, "null"),
        False,
    ),
    "isChipVGroupValid: 3 vGroups take no 4 cores": (
        chip(VResource(5, 4, "null"), GROUPS3),
        VResource(4, 3, "null"),
        False,
    ),
    "isChipVGroupValid: 3 vGroups take 2 cores": (
        chip(VResource(5, 4, "null"), GROUPS3),
        VResource(2, 1, "null"),
        True,
    ),
    "isChipVGroupValid: 4 vGroups take no 2 cores": (
        chip(VResource(4, 4, "null"), GROUPS4),
        VResource(2, 1, "null"),
        False,
    ),
    "isChipVGroupValid: 4 vGroups take 1 core": (
        chip(VResource(4, 4, "null"), GROUPS4),
        VResource(1, 1, "null"),
        True,
    ),
    "isChipVGroupValid: a whole chip is not checked": (
        chip(VResource(5, 4, "null"), GROUPS4, segmented=False),
        VResource(4, 3, "null"),
        True,
    ),
    "isChipDVPPValid: dvpp yes needs it free": (
        chip(VResource(8, 7, "null")),
        VResource(4, 4, "yes"),
        False,
    ),
    "isChipDVPPValid: dvpp null is refused where it is off": (
        chip(VResource(8, 7, "no")),
        VResource(4, 3, "null"),
        False,
    ),
    "isChipDVPPValid: dvpp no takes any": (
        chip(VResource(8, 7, "no")),
        VResource(4, 3, "no"),
        True,
    ),
}


@pytest.mark.parametrize(("c", "res", "want"), MEETS.values(), ids=MEETS.keys())
def test_a_chip_meets_a_request_with_room_vgroups_and_dvpp(
    c: VChip, res: VResource, want: bool
) -> None:
    """``isChipMeetResReq``."""
    assert c.meets(res) is want


DVPP = {
    "UpdateDVPP yes": ("update", ("no", "yes"), "yes", ("yes", "no")),
    "UpdateDVPP no where none is used": ("update", ("no", "yes"), "no", ("no", "yes")),
    "UpdateDVPP no after null": ("update", ("null", "null"), "no", ("null", "null")),
    "UpdateDVPP null": ("update", ("no", "yes"), "null", ("null", "null")),
    "UpdateDVPP null after yes": ("update", ("yes", "no"), "null", ("yes", "no")),
    "ResetDVPP yes": ("reset", ("yes", "no"), "yes", ("no", "yes")),
    "ResetDVPP null": ("reset", ("null", "null"), "null", ("null", "null")),
}


@pytest.mark.parametrize(("how", "before", "word", "after"), DVPP.values(), ids=DVPP.keys())
def test_dvpp_words_move_between_used_and_free(
    how: str, before: tuple[str, str], word: str, after: tuple[str, str]
) -> None:
    """``UpdateDVPP`` and ``ResetDVPP``: (used, free) DVPP words."""
    c = chip(VResource(8, 7, before[1]))
    c.used = VResource(0, 0, before[0])
    (c.update_dvpp if how == "update" else c.reset_dvpp)(word)
    assert (c.used.dvpp, c.free.dvpp) == after
