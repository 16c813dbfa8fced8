"""Ascend 310P vNPUs the MindCluster way: tables built from the branches of Volcano's Go code.

Volcano has no test for ``pkg/scheduler/api/devices/ascend/mindcluster/ascend310p/vnpu`` or the
plugin's ``devices/ascend/310p/vnpu``, so each row is named by the Go function and the branch it
takes (ed72c7c8). A pod's request and a chip's own checks are in ``test_mindcluster_chip.py``;
the ConfigMaps and init-params in ``test_mindcluster_info.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from caldera.devices.mindcluster import PRECHECK_REASON, NpuNode, Refusal, score_nodes
from caldera.devices.mindcluster_chip import (
    ASCEND_REAL,
    EMPTY,
    NPU_CORE,
    PREDICATE_TIME,
    MindClusterError,
    NpuPod,
    VResource,
    read_pod,
)
from caldera.devices.mindcluster_info import ClusterInfo, ConfigMapView, DeviceInfo, InitParams
from caldera.devices.mindcluster_node import NodeInputs, open_node, session_node

LABELS = {
    "accelerator": "huawei-Ascend310P",
    "servertype": "Ascend310P-8",
    "node.kubernetes.io/npu.chip.name": "310P3",
}
RING = {"ring-controller.atlas": "ascend-310P"}
NOW = 1_700_000_000.0
STAMP = "1700000000000000000"


def node(
    chips: int = 2,
    *,
    free: str | None = None,
    labels: Mapping[str, str | None] | None = None,
    annotations: Mapping[str, str] | None = None,
    capacity: Mapping[str, float] | None = None,
    pods: tuple[NpuPod, ...] = (),
    info: DeviceInfo | None = None,
    status: str = "",
) -> NpuNode:
    """A 310P node of ``chips`` 8-core chips, all free unless ``free`` says otherwise."""
    free = ",".join(f"Ascend310P-{i}" for i in range(chips)) if free is None else free
    merged = {**LABELS, **(labels or {})}
    node_labels = {k: v for k, v in merged.items() if v is not None}
    node_annotations = {"huawei.com/Ascend310P": free, **(annotations or {})}
    node_capacity = {NPU_CORE: 8.0 * chips} if capacity is None else capacity
    inputs = NodeInputs("n1", node_labels, node_annotations, node_capacity)
    return session_node(inputs, pods, info or DeviceInfo(), status)


def pod(
    name: str = "p",
    cores: float = 4,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    counted: bool = True,
) -> NpuPod:
    resources = {NPU_CORE: float(cores)}
    return read_pod(
        name,
        name,
        {**RING, **(labels or {})},
        annotations or {},
        [(resources, resources)],
        list(resources),
        counted=counted,
    )


def held(name: str, value: str, *, real: bool = True, counted: bool = True) -> NpuPod:
    """A pod on the node holding ``value`` in ``huawei.com/npu-core``."""
    annotations = {NPU_CORE: value}
    if real:
        annotations[ASCEND_REAL] = f"Ascend310P-x-100-{value.split('-')[0]}_0"
    return pod(name, annotations=annotations, counted=counted)


HIGH = {"vnpu-level": "high"}


# -- the node as the session opens ------------------------------------------------------------

Summary = tuple[bool, bool, str, VResource, int, int, list[int]]


def summary(n: NpuNode) -> Summary:
    return (
        n.idle_known,
        n.valid,
        n.chip_kind,
        n.total,
        n.ai_core_per_chip,
        n.total_chip_num,
        sorted(n.chips),
    )


KIND = "Ascend310P"
SETUP: dict[str, tuple[NpuNode, Summary]] = {
    "initNPUNodeByNodeInf: no huawei.com capacity": (
        node(capacity={"cpu": 4.0}),
        (False, False, "", EMPTY, 0, 0, []),
    ),
    "checkDyVNodeResourceInitialized: no huawei.com/npu-core": (
        node(capacity={"huawei.com/Ascend310P": 2.0}),
        (True, False, "", EMPTY, 0, 0, []),
    ),
    "GetChipKindFromNpuNode: no accelerator label": (
        node(labels={"accelerator": None}),
        (True, False, "", EMPTY, 0, 0, []),
    ),
    "GetChipKindFromNpuNode: no dash in the label": (
        node(labels={"accelerator": "Ascend310P"}),
        (True, False, "", EMPTY, 0, 0, []),
    ),
    "setChipPropertiesFromNPUNode: no servertype label": (
        node(labels={"servertype": None}),
        (True, False, KIND, EMPTY, 0, 0, []),
    ),
    "setChipPropertiesFromNPUNode: no chip name label": (
        node(labels={"node.kubernetes.io/npu.chip.name": None}),
        (True, False, KIND, EMPTY, 0, 0, []),
    ),
    "setChipPropertiesFromNPUNode: no huawei.com/Ascend310P annotation": (
        session_node(NodeInputs("n1", LABELS, {}, {NPU_CORE: 16.0}), (), DeviceInfo(), ""),
        (True, False, KIND, EMPTY, 0, 0, []),
    ),
    "getVChipCoreNum: servertype without a dash": (
        node(labels={"servertype": "Ascend310P"}),
        (True, False, KIND, VResource(16, 0), 0, 0, []),
    ),
    "getTotalChipNum: cores not a multiple of the chip's": (
        node(capacity={NPU_CORE: 12.0}),
        (True, False, KIND, VResource(12, 0), 8, 0, []),
    ),
    "getCpuNumPerChip: no node template has 6-core chips": (
        node(labels={"servertype": "Ascend310P-6"}, capacity={NPU_CORE: 12.0}),
        (True, False, KIND, VResource(12, 0), 6, 2, []),
    ),
    "setNodeVNPUInfo: 8-core chips, 7 AI CPUs each": (
        node(),
        (True, True, KIND, VResource(16, 14, "no"), 8, 2, [0, 1]),
    ),
    "initTemplate: 10-core dual chips": (
        node(labels={"servertype": "Ascend310P-10-dual"}, capacity={NPU_CORE: 20.0}),
        (True, True, KIND, VResource(20, 14, "no"), 10, 2, [0, 1]),
    ),
    "getCardIDsFromNodeAndDeviceInfo: names that are no chip are passed over": (
        node(free="Ascend310P-0,Ascend310P-x,,Ascend310P-3"),
        (True, True, KIND, VResource(16, 14, "no"), 8, 2, [0, 3]),
    ),
}


@pytest.mark.parametrize(("n", "want"), SETUP.values(), ids=SETUP.keys())
def test_a_node_is_valid_only_when_every_setup_step_reads(n: NpuNode, want: Summary) -> None:
    """``initNPUNodeByNodeInf`` and ``setNodeVNPUInfo``: a failed step leaves the node
    invalid, with the fields set before it."""
    assert summary(n) == want


def test_a_new_chip_has_nothing_used_and_dvpp_free() -> None:
    """``NewVChip``."""
    chip = node().chips[0]
    assert (chip.name, chip.total, chip.used, chip.free) == (
        "Ascend310P-0",
        VResource(8, 7, "no"),
        VResource(0, 0, "no"),
        VResource(8, 7, "yes"),
    )


def test_the_session_annotations_are_the_nodes_nodeds_status_and_the_device_list() -> None:
    """``syncAnnotation`` and ``updateNPUNodeDeviceInfos``: NodeD's status ("Healthy" when it
    reported none), the device list on top when it has a time."""
    fresh = DeviceInfo({"huawei.com/Ascend310P": "Ascend310P-1"}, update_time=5_000)
    n = node(annotations={"other": "x"}, info=fresh)
    assert n.annotations == {
        "huawei.com/Ascend310P": "Ascend310P-1",
        "other": "x",
        "nodedNodeHealtyStatus": "Healthy",
    }
    assert sorted(n.chips) == [1]
    timeless = DeviceInfo({"huawei.com/Ascend310P": "Ascend310P-1"})
    n = node(info=timeless, status="UnHealthy")
    assert n.annotations["huawei.com/Ascend310P"] == "Ascend310P-0,Ascend310P-1"
    assert n.annotations["nodedNodeHealtyStatus"] == "UnHealthy"


ChipState = dict[int, tuple[VResource, VResource, bool, bool]]


def chip_state(n: NpuNode) -> ChipState:
    return {i: (c.free, c.used, c.segmented, c.unstable) for i, c in sorted(n.chips.items())}


FREE_CHIP = (VResource(8, 7, "yes"), VResource(0, 0, "no"), False, False)
HOLDS: dict[str, tuple[NpuNode, ChipState]] = {
    "addNPUResourceWholeCard: chip 0 whole": (
        node(pods=(held("a", "0"),)),
        {0: (VResource(0, 0, "yes"), VResource(8, 7, "no"), False, False), 1: FREE_CHIP},
    ),
    "IsPodResUnstable: no huawei.com/AscendReal yet": (
        node(pods=(held("a", "0", real=False),)),
        {0: (VResource(0, 0, "yes"), VResource(8, 7, "no"), False, True), 1: FREE_CHIP},
    ),
    "addNPUResourceWholeCard: a chip not listed free is made": (
        node(free="Ascend310P-0", capacity={NPU_CORE: 16.0}, pods=(held("a", "1"),)),
        {0: FREE_CHIP, 1: (VResource(0, 0, "yes"), VResource(8, 7, "no"), False, False)},
    ),
    "addNPUResourceWholeCard: an unhealthy chip is passed over": (
        node(
            free="Ascend310P-0",
            capacity={NPU_CORE: 16.0},
            annotations={"huawei.com/Ascend310P-Unhealthy": "Ascend310P-1"},
            pods=(held("a", "1"),),
        ),
        {0: FREE_CHIP},
    ),
    "getCardPhysicsIDFromAscendCore: one bad id passes the pod over": (
        node(pods=(held("a", "0,1-vir04"),)),
        {0: FREE_CHIP, 1: FREE_CHIP},
    ),
    "addNPUResourceVNPUCard: vir04_3c on chip 1": (
        node(pods=(held("a", "1-vir04_3c"),)),
        {0: FREE_CHIP, 1: (VResource(4, 4, "null"), VResource(4, 3, "null"), True, False)},
    ),
    "addNPUResourceVNPUCard: vir04_4c_dvpp takes the DVPP": (
        node(pods=(held("a", "0-vir04_4c_dvpp"),)),
        {0: (VResource(4, 3, "no"), VResource(4, 4, "yes"), True, False), 1: FREE_CHIP},
    ),
    "getPodUsedRes: an unknown template segments the chip and counts nothing": (
        node(pods=(held("a", "0-vir99"),)),
        {0: (VResource(8, 7, "yes"), VResource(0, 0, "no"), True, False), 1: FREE_CHIP},
    ),
    "getVNPUCardIDFromAscendCore: no chip number": (
        node(pods=(held("a", "x-vir01"),)),
        {0: FREE_CHIP, 1: FREE_CHIP},
    ),
    "isNPUTask: a pod requesting no huawei.com resource is passed over": (
        node(pods=(read_pod("a", "a", RING, {NPU_CORE: "0"}, [({}, {NPU_CORE: 1.0})]),)),
        {0: FREE_CHIP, 1: FREE_CHIP},
    ),
    "initVChips: a releasing pod still holds its chip": (
        node(pods=(held("a", "0-vir01", counted=False),)),
        {0: (VResource(7, 6, "null"), VResource(1, 1, "null"), True, False), 1: FREE_CHIP},
    ),
}


@pytest.mark.parametrize(("n", "want"), HOLDS.values(), ids=HOLDS.keys())
def test_the_pods_on_a_node_hold_its_chips_by_their_annotation(n: NpuNode, want: ChipState) -> None:
    """``initVChips`` and ``addNPUResource``."""
    assert chip_state(n) == want


CACHE = {
    "AddResource: a vNPU pod holds its template": (held("a", "0-vir04_3c"), {"vir04_3c": {"a"}}),
    "AddResource: whole chips hold the empty template": (held("a", "0,1"), {"": {"a"}}),
    "AddTask: a releasing pod is not added": (held("a", "0-vir01", counted=False), {}),
    "HasDeviceRequest: a pod without the label is not added": (
        read_pod("a", "a", {}, {NPU_CORE: "0-vir01"}, [({NPU_CORE: 1.0}, {NPU_CORE: 1.0})]),
        {},
    ),
}


@pytest.mark.parametrize(("p", "want"), CACHE.values(), ids=CACHE.keys())
def test_the_cache_counts_the_template_each_pod_holds(p: NpuPod, want: dict[str, set[str]]) -> None:
    """``AddResource`` on the cache's device (``addTaskInConCache``, ``PodAllocation``)."""
    n = node(pods=(p,))
    assert n.concurrent == want
    assert n.allocation == ({p.uid: p.annotations[NPU_CORE]} if want else {})


# -- the filter -------------------------------------------------------------------------------

SHORT = (held("a", "0-vir04", counted=False), held("b", "1-vir04", counted=False))
"""Both chips hold a releasing vir04: 4 cores and 3 CPUs free on each, no template held."""
FILTER: dict[str, tuple[NpuNode, NpuPod, float | None, Refusal | None]] = {
    "preCheckNodePredicate: NodeD reports PreSeparate": (
        node(status="PreSeparate"),
        pod(),
        16,
        Refusal(PRECHECK_REASON, "node is PreSeparate, due to nodeD reported node status"),
    ),
    "checkNodeNum: no idle huawei.com/npu-core": (
        node(),
        pod(),
        None,
        Refusal(PRECHECK_REASON, "not have huawei.com/npu-core"),
    ),
    "checkNodeNum: a node without huawei.com capacity keeps no idle": (
        node(capacity={"cpu": 1.0}),
        pod(),
        16,
        Refusal(PRECHECK_REASON, "not have huawei.com/npu-core"),
    ),
    "checkNodeNum: idle below the request (whole cores)": (
        node(),
        pod(),
        3.9,
        Refusal(PRECHECK_REASON, "node not meet task request huawei.com/npu-core:4"),
    ),
    "CheckNodeNPUByDyPod: invalid vNode": (
        node(labels={"servertype": None}),
        pod(),
        16,
        Refusal("", "checkNodeNPUByDyTask invalid VNode"),
    ),
    "GetPodResource: a wrong dvpp word": (
        node(),
        pod(cores=2, labels={"vnpu-dvpp": "maybe"}),
        16,
        Refusal("", "err dvpp value:maybe"),
    ),
    "CheckNodeNPUByDyPod: an empty node": (node(), pod(), 16, None),
    "getResTemplateFromTaskSetting: 3 cores (no template) passes the filter": (
        node(),
        pod(cores=3),
        16,
        None,
    ),
    "taskAICPUCanBeDowngrade: vir04 short of CPUs passes as vir04_3c": (
        node(pods=SHORT),
        pod(labels=HIGH),
        16,
        None,
    ),
    "IsNodeNotMeetRes without a downgrade: Volcano lets the node through": (
        node(pods=SHORT),
        pod(labels={"vnpu-dvpp": "yes"}),
        16,
        None,
    ),
    "IsNodeHasDifferentUnFinishedTask: the template held": (
        node(pods=(held("a", "0-vir04_3c"),)),
        pod(),
        16,
        None,
    ),
    "IsNodeHasDifferentUnFinishedTask: another template": (
        node(pods=(held("a", "0-vir04_3c"),)),
        pod(cores=1),
        16,
        Refusal("", "p is using n1, and not rewrite"),
    ),
    "IsNodeHasDifferentUnFinishedTask: two templates held": (
        node(pods=(held("a", "0-vir04_3c"), held("b", "1-vir01"))),
        pod(),
        16,
        Refusal("", "p is using n1, and not rewrite"),
    ),
    "GetTemplateByResReq: whole chips have no template": (
        node(pods=(held("a", "0"),)),
        pod(cores=8),
        16,
        Refusal("", 'vnpu.VResource{Aicore:8, Aicpu:7, DVPP:"null"} not get template'),
    ),
}


@pytest.mark.parametrize(("n", "p", "idle", "want"), FILTER.values(), ids=FILTER.keys())
def test_the_filter_refuses_with_volcanos_reason_and_message(
    n: NpuNode, p: NpuPod, idle: float | None, want: Refusal | None
) -> None:
    """``FilterNode``: ``preCheckNodePredicate`` then ``CheckNodeNPUByPod``."""
    assert n.filter(p, idle) == want


def test_a_downgrade_is_recorded_per_node_and_pod() -> None:
    """``CheckNodeNPUByDyPod`` writes ``DowngradeCache[pod.Name]`` on the node it filters."""
    short, roomy = node(pods=SHORT), node()
    assert short.filter(pod(labels=HIGH), 16) is None
    assert roomy.filter(pod(labels=HIGH), 16) is None
    assert (short.downgraded, roomy.downgraded) == ({"p"}, set())


# -- the allocation ---------------------------------------------------------------------------

ALLOCATE: dict[str, tuple[NpuNode, NpuPod, str]] = {
    "selectChipFromNodeSegment: equal chips, the lowest id": (node(), pod(), "0-vir04_3c"),
    "vChipsList: the least free chip first": (
        node(pods=(held("a", "1-vir01"),)),
        pod(cores=1),
        "1-vir01",
    ),
    "selectChipFromNodeSegment: an unstable chip takes no vNPU": (
        node(pods=(held("a", "1-vir01", real=False),)),
        pod(cores=1),
        "0-vir01",
    ),
    "selectChipFromNodeWhole: one chip": (node(), pod(cores=8), "0"),
    "selectChipFromNodeWhole: two chips": (node(), pod(cores=16), "0,1"),
    "selectChipFromNodeWhole: a segmented chip is passed over": (
        node(pods=(held("a", "0-vir01", counted=False),)),
        pod(cores=8),
        "1",
    ),
}


@pytest.mark.parametrize(("n", "p", "value"), ALLOCATE.values(), ids=ALLOCATE.keys())
def test_the_allocation_names_the_chips_on_the_pod(n: NpuNode, p: NpuPod, value: str) -> None:
    """``Allocate``: ``SelectChipFromNode`` and ``BuildNPUTopologyAnnotations``."""
    assert n.allocate(p, NOW) == {PREDICATE_TIME: STAMP, NPU_CORE: value}
    assert n.allocation[p.uid] == value


ALLOCATE_ERRORS: dict[str, tuple[NpuNode, NpuPod, str]] = {
    "SelectChipFromNode: no chips": (
        node(free="", capacity={NPU_CORE: 16.0}),
        pod(),
        "selectChipFromNode sorted chips len 0",
    ),
    "selectChipFromNodeSegment: no chip has room": (
        node(pods=(held("a", "0,1", counted=False),)),
        pod(),
        "selectChipFromNodeSegment available chip not found for req <4>",
    ),
    "selectChipFromNodeWhole: one whole chip of two": (
        node(pods=(held("a", "0-vir01", counted=False),)),
        pod(cores=16),
        "selectChipFromNodeWhole free whole chip <1> not enough for req <2>",
    ),
    "selectChipFromNodeWhole: no template is 0 chips": (
        node(),
        pod(cores=3),
        "task require card number 0",
    ),
}


@pytest.mark.parametrize(("n", "p", "error"), ALLOCATE_ERRORS.values(), ids=ALLOCATE_ERRORS.keys())
def test_an_allocation_without_chips_fails(n: NpuNode, p: NpuPod, error: str) -> None:
    """``Allocate``'s errors: the plugin fails the placement with them."""
    with pytest.raises(MindClusterError, match=error):
        n.allocate(p, NOW)
    assert n.allocation == {}


def test_a_downgraded_pod_gets_the_smaller_template_but_counts_its_own() -> None:
    """``Allocate`` downgrades by ``DowngradeCache``; ``addResource`` counts
    ``GetPodResource``'s request, so the chip goes one AI CPU below zero."""
    n = node(pods=SHORT)
    p = pod(labels=HIGH)
    assert n.filter(p, 16) is None
    assert n.allocate(p, NOW)[NPU_CORE] == "0-vir04_3c"
    assert n.chips[0].free == VResource(0, -1, "null")
    assert n.concurrent == {"vir04_3c": {"p"}}


def test_a_pod_placed_this_session_fixes_the_nodes_template() -> None:
    """``Allocate`` adds to ``ConCache``: the next pod must ask the same template."""
    n = node()
    n.allocate(pod("a"), NOW)
    assert n.filter(pod("b"), 12) is None
    assert n.filter(pod("c", cores=2), 12) == Refusal("", "c is using n1, and not rewrite")


# -- release ----------------------------------------------------------------------------------


def test_release_gives_back_a_session_allocation_and_leaves_the_chip_segmented() -> None:
    """``Release``: ``SubResource`` by ``PodAllocation``; the ``SegmentFlag`` reset is commented
    out in Go, and ``releaseTaskInConCache`` empties the template."""
    n = node()
    p = pod()
    n.allocate(p, NOW)
    assert n.release(p) == (PREDICATE_TIME, NPU_CORE)
    chip = n.chips[0]
    assert (chip.free, chip.used, chip.segmented) == (
        VResource(8, 7, "null"),
        VResource(0, 0, "null"),
        True,
    )
    assert (n.concurrent, n.allocation) == ({}, {})


def test_release_reads_the_pods_own_annotation_and_frees_again_when_called_again() -> None:
    """``SubResource`` reads ``pod.Annotations`` first, so a running pod evicted (``RemoveTask``
    then the predicates plugin's ``Release``) gives its vNPU back twice."""
    running = held("a", "0-vir04_3c")
    n = node(pods=(running,))
    assert n.chips[0].free == VResource(4, 4, "null")
    n.release(running)
    assert n.chips[0].free == VResource(8, 7, "null")
    assert n.concurrent == {}
    n.release(running)
    assert n.chips[0].free == VResource(12, 10, "null")


def test_release_of_a_pod_that_asks_nothing_changes_nothing() -> None:
    """``SubResource`` stops at ``HasDeviceRequest``; ``Release`` still names its keys."""
    n = node(pods=(held("a", "0-vir04_3c"),))
    other = read_pod("a", "a", {}, {NPU_CORE: "0-vir04_3c"}, [({}, {})])
    assert n.release(other) == (PREDICATE_TIME, NPU_CORE)
    assert n.chips[0].free == VResource(4, 4, "null")


# -- the node score ---------------------------------------------------------------------------


def scored(idle: float | None, downgraded: bool) -> tuple[NpuNode, float | None]:
    n = NpuNode("n", idle_known=True)
    if downgraded:
        n.downgraded.add("p")
    return n, idle


SCORES = {
    "ScoreBatchNodes: the least idle node gets 8": (
        [scored(16, False), scored(8, False), scored(12, False)],
        [0.0, 8.0, 0.0],
    ),
    "orderVNodesByFreeResource: equal idle keeps the order": (
        [scored(8, False), scored(8, False)],
        [8.0, 0.0],
    ),
    "vNodesList.Less: no idle goes last": ([scored(None, False), scored(16, False)], [0.0, 8.0]),
    "downgraded nodes get 8 until the first other one gets 16": (
        [scored(4, True), scored(8, False), scored(2, True), scored(16, False)],
        [8.0, 16.0, 8.0, 0.0],
    ),
    "every node downgraded": ([scored(4, True), scored(2, True)], [8.0, 8.0]),
    "no node": ([], []),
}


@pytest.mark.parametrize(("nodes", "want"), SCORES.values(), ids=SCORES.keys())
def test_the_node_score_favours_the_least_idle_node_not_downgraded(
    nodes: list[tuple[NpuNode, float | None]], want: list[float]
) -> None:
    """``ScoreBatchNodes``, before ``deviceshare.ScheduleWeight``."""
    assert score_nodes("p", nodes) == want


def test_the_user_guides_job_takes_a_whole_chip_and_its_twin_is_refused() -> None:
    """Volcano's ``how_to_use_vnpu.md`` job (config 043's): ``huawei.com/npu-core: 8``,
    ``vnpu-level: low``, ``vnpu-dvpp: "null"``. The first replica takes chip 0 whole; the
    second is refused on the same node, as every whole-chip pod after the first is
    (``IsNodeHasDifferentUnFinishedTask`` finds no template for whole chips)."""
    labels = {"vnpu-level": "low", "vnpu-dvpp": "null", "app": "infers"}
    n = node()
    first, second = pod("mindx-dls-0", 8, labels=labels), pod("mindx-dls-1", 8, labels=labels)
    assert n.filter(first, 16) is None
    assert n.allocate(first, NOW) == {PREDICATE_TIME: STAMP, NPU_CORE: "0"}
    assert n.filter(second, 8) == Refusal(
        "", 'vnpu.VResource{Aicore:8, Aicpu:7, DVPP:"null"} not get template'
    )
    bound = pod("mindx-dls-0", 8, labels=labels, annotations={NPU_CORE: "0", ASCEND_REAL: "0"})
    next_session = node(pods=(bound,))
    assert next_session.filter(second, 8) == n.filter(second, 8)
    assert next_session.chips[0].free == VResource(0, 0, "yes")


def test_a_node_opens_with_its_configmaps_device_list_and_nodeds_status() -> None:
    """``InitVNPUDevice``: ``GetDeviceInfoAndSetInformerStart`` works the free chips out of
    ``baseDeviceInfos`` (chip 0 is a running pod's), ``GetNodeDInfo`` gives the status."""
    cluster = ClusterInfo(True)
    listed = {
        "n1": {
            "DeviceList": {"huawei.com/Ascend310P": "Ascend310P-0,Ascend310P-1"},
            "UpdateTime": 9,
        }
    }
    data = {
        "cluster-info-device-0": json.dumps(
            {f"mindx-dl-deviceinfo-{k}": v for k, v in listed.items()}
        )
    }
    cluster.update(
        ConfigMapView("mindx-dl", "cluster-info-device-0", {"mx-consumer-volcano": "true"}, data)
    )
    base = json.dumps({"Ascend310P-0": {}, "Ascend310P-1": {}})
    whole = pod(
        "a",
        8,
        annotations={NPU_CORE: "0", ASCEND_REAL: "0", "huawei.com/Ascend310P": "Ascend310P-0"},
    )
    inputs = NodeInputs("n1", LABELS, {"baseDeviceInfos": base}, {NPU_CORE: 16.0})
    n = open_node(inputs, (whole,), cluster, InitParams(), NOW)
    assert n.annotations["huawei.com/Ascend310P"] == "Ascend310P-1"
    assert n.annotations["nodedNodeHealtyStatus"] == "Healthy"
    assert chip_state(n) == {
        0: (VResource(0, 0, "yes"), VResource(8, 7, "no"), False, False),
        1: FREE_CHIP,
    }
    kept = open_node(inputs, (whole,), cluster, InitParams(self_maintain=False), NOW)
    assert kept.annotations["huawei.com/Ascend310P"] == "Ascend310P-0,Ascend310P-1"
