"""Ascend NPUs the Volcano way (``deviceshare.AscendHAMiVNPUEnable``): tables after Volcano's
``pkg/scheduler/api/devices/ascend/hami/device_info_test.go`` and
``pkg/scheduler/api/devices/config/config_test.go`` (ed72c7c8), each row named by its Go case;
with rows for ``NewAscendDevices`` and ``InitDevicesConfig`` beside them. The rules no Go test
covers, the plugin's arguments and sessions: ``test_volcano_vnpu_rules.py``.

Not carried over: the ``Nil AscendDevices receiver`` and ``Add same pod multiple times`` rows of
``TestAscendDevices_AddResource`` (no nil receiver in Python; usage is rebuilt from the set of
pods each session, so a pod cannot be added twice), ``TestHAMiReleaseKeepsCommittedAnnotations``
(only a placement of the session itself is undone) and ``TestParseDeviceConfig`` (the ``nvidia``
section, Volcano's vGPU's).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from caldera.devices.ascend import Template, VnpuConfig
from caldera.devices.fit import NO_GIVEN, CardUse, FitOptions, reason_text
from caldera.devices.model import Card, DeviceDefaults, NodeView
from caldera.devices.usage import HeldPod, cluster_usage
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import node_cards
from caldera.devices.volcano_vnpu import (
    PARTIAL_MEMORY,
    card_refusal,
    card_score,
    verify_request,
    vnpu_vendor,
)
from caldera.devices.volcano_vnpu_config import (
    CONFIG_KEY,
    DEFAULT_CONFIG,
    DevicesConfig,
    VnpuType,
    device_config,
    parse_devices_config,
)
from caldera.plugins.deviceshare.state import RELEASABLE_REASONS

CONFIG_YAML = """
vnpus:
- chipName: 910A
  commonWord: Ascend910A
  resourceName: huawei.com/Ascend910A
  resourceMemoryName: huawei.com/Ascend910A-memory
  memoryAllocatable: 32768
  memoryCapacity: 32768
  aiCore: 30
  templates:
    - {name: vir02, memory: 2184, aiCore: 2}
    - {name: vir04, memory: 4369, aiCore: 4}
    - {name: vir08, memory: 8738, aiCore: 8}
    - {name: vir16, memory: 17476, aiCore: 16}
- chipName: 910B2
  commonWord: Ascend910B2
  resourceName: huawei.com/Ascend910B2
  resourceMemoryName: huawei.com/Ascend910B2-memory
  memoryAllocatable: 65536
  memoryCapacity: 65536
  aiCore: 24
  aiCPU: 6
  templates:
    - {name: vir03_1c_8g, memory: 8192, aiCore: 3, aiCPU: 1}
    - {name: vir06_1c_16g, memory: 16384, aiCore: 6, aiCPU: 1}
    - {name: vir12_3c_32g, memory: 32768, aiCore: 12, aiCPU: 3}
- chipName: 910B3
  commonWord: Ascend910B3
  resourceName: huawei.com/Ascend910B3
  resourceMemoryName: huawei.com/Ascend910B3-memory
  memoryAllocatable: 65536
  memoryCapacity: 65536
  aiCore: 20
  aiCPU: 7
  templates:
    - {name: vir05_1c_16g, memory: 16384, aiCore: 5, aiCPU: 1}
    - {name: vir10_3c_32g, memory: 32768, aiCore: 10, aiCPU: 3}
- chipName: 310P3
  commonWord: Ascend310P
  resourceName: huawei.com/Ascend310P
  resourceMemoryName: huawei.com/Ascend310P-memory
  memoryAllocatable: 21527
  memoryCapacity: 24576
  aiCore: 8
  aiCPU: 7
  templates:
    - {name: vir01, memory: 3072, aiCore: 1, aiCPU: 1}
    - {name: vir02, memory: 6144, aiCore: 2, aiCPU: 2}
    - {name: vir04, memory: 12288, aiCore: 4, aiCPU: 4}
nvidia:
  resourceCountName: volcano.sh/vgpu-number
  deviceSplitCount: 10
"""
"""``config_yaml`` of ``device_info_test.go``, its vnpus (the 910B4 types left out) and a piece
of its nvidia section (not read here)."""
CONF = parse_devices_config(CONFIG_YAML)
A310P = CONF.types[-1]
"""``conf.VNPUConfigs()[len(conf.VNPUConfigs())-1]``."""


def card_type(word: str, capacity: int, templates: tuple[Template, ...] = ()) -> VnpuType:
    """A card type as ``createTestAscendDevice`` configures one: whole cards of ``capacity``."""
    npu = VnpuConfig("", word, capacity, capacity, 1, 0, 0, templates)
    return VnpuType(npu, f"huawei.com/{word}", f"huawei.com/{word}-memory")


A910A = card_type("Ascend910A", 32768)
"""``createTestAscendAllocateDevice``'s configuration."""


def npu(vendor: Vendor, uuid: str, devmem: int = 32768, devcore: int = 30, count: int = 1,
        network: int | None = None, index: int = 0) -> Card:  # fmt: skip
    return Card(uuid, count, devmem, devcore, vendor.name, True, index, network=network)


# -- config_test.go ------------------------------------------------------------------------------


def test_parse_vnpus_new_wrapper_format() -> None:
    """``TestParseVNPUsNewWrapperFormat``."""
    config = parse_devices_config(
        "vnpus:\n  hamiVnpuCore: false\n  configs:\n  - chipName: 910A\n"
        "    commonWord: Ascend910A\n    resourceName: huawei.com/Ascend910A\n"
        "    resourceMemoryName: huawei.com/Ascend910A-memory\n    memoryAllocatable: 32768\n"
        "    memoryCapacity: 32768\n    aiCore: 30\n    templates:\n"
        "      - name: vir02\n        memory: 2184\n        aiCore: 2\n"
    )
    assert not config.hami_vnpu_core
    (only,) = config.types
    assert (only.npu.chip_name, only.common_word, only.npu.memory_allocatable) == (
        "910A",
        "Ascend910A",
        32768,
    )
    assert only.npu.templates == (Template("vir02", 2184, 2, 0),)
    assert (only.resource_name, only.resource_memory_name) == (
        "huawei.com/Ascend910A",
        "huawei.com/Ascend910A-memory",
    )


def test_parse_vnpus_legacy_array_format() -> None:
    """``TestParseVNPUsLegacyArrayFormat`` (on ``config_yaml``): the bare list, ``hamiVnpuCore``
    off."""
    assert not CONF.hami_vnpu_core
    assert [(t.npu.chip_name, t.common_word) for t in CONF.types] == [
        ("910A", "Ascend910A"),
        ("910B2", "Ascend910B2"),
        ("910B3", "Ascend910B3"),
        ("310P3", "Ascend310P"),
    ]
    assert A310P.npu.memory_allocatable == 21527


def test_parse_vnpus_wrapper_with_empty_configs() -> None:
    """``TestParseVNPUsWrapperWithEmptyConfigs``."""
    assert parse_devices_config("vnpus:\n  hamiVnpuCore: true\n  configs: []\n") == DevicesConfig(
        (), True
    )


def test_templates_are_sorted_by_memory() -> None:
    """``InitDevices`` sorts each type's templates by memory."""
    config = parse_devices_config(
        "vnpus:\n- commonWord: X\n  templates:\n  - {name: big, memory: 9}\n"
        "  - {name: small, memory: 1}\n"
    )
    assert [t.name for t in config.types[0].npu.templates] == ["small", "big"]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(None, id="no such ConfigMap"),
        pytest.param({}, id="no device-config.yaml"),
        pytest.param({CONFIG_KEY: "vnpus: [oops"}, id="not YAML"),
        pytest.param({CONFIG_KEY: "vnpus:\n- commonWord: X\n  memoryCapacity: lots\n"}, id="type"),
        pytest.param({CONFIG_KEY: "vnpus:\n  hamiVnpuCore: 'yes'\n"}, id="a quoted bool"),
    ],
)
def test_init_devices_config_falls_back_to_the_default(data: Mapping[str, str] | None) -> None:
    """``InitDevicesConfig``: a ConfigMap that cannot be read gives ``GetDefaultDevicesConfig``,
    the 310P alone with the chart's numbers."""
    assert device_config(data) == DEFAULT_CONFIG
    (only,) = DEFAULT_CONFIG.types
    assert (only.common_word, only.resource_name) == ("Ascend310P", "huawei.com/Ascend310P")
    assert (only.npu.memory_allocatable, only.npu.memory_capacity) == (21527, 24576)
    assert [t.memory for t in only.npu.templates] == [3072, 6144, 12288]


# -- Test_trimMemory -----------------------------------------------------------------------------

TRIM = [(0, 3072), (1, 3072), (100, 3072), (3071, 3072), (3072, 3072), (3073, 6144),
        (6143, 6144), (6144, 6144), (6144, 6144), (6145, 12288), (12288, 12288),
        (12289, 21527), (21527, 21527), (21528, 21527), (24576, 21527), (24577, 0)]  # fmt: skip


@pytest.mark.parametrize(
    ("memory", "want"), TRIM, ids=[f"test{i}" for i in range(1, len(TRIM) + 1)]
)
def test_trim_memory(memory: int, want: int) -> None:
    """``Test_trimMemory`` on the 310P: a template, the whole card up to its capacity, else 0."""
    assert A310P.npu.trim_memory(memory)[0] == want


# -- Test_fit ------------------------------------------------------------------------------------

P310 = vnpu_vendor(A310P)
FIT = {
    "test1": (1024, 0, (1, 3072, 0), False, False, None),
    "test2": (21527, 0, (1, 3072, 0), False, False, "CardInsufficientMemory"),
    "test3": (6144, 0, (1, 12288, 0), False, False, None),
    "test4": (24576, 0, (0, 0, 0), False, False, "CardInsufficientMemory"),
    "test5_core": (6144, 4, (1, 12288, 6), False, False, "CardInsufficientCore"),
    "hami_core_mode_should_fail_when_node_not_support_hami_vnpu_core": (
        1024, 20, (0, 0, 0), True, False, "ModeNotFit"),
    "hami_core_mode_should_fail_when_core_is_insufficient": (
        1024, 20, (0, 0, 90), True, True, "CardInsufficientCore"),
    "hami_core_mode_should_pass_when_node_support_hami_vnpu_core": (
        1024, 20, (0, 0, 0), True, True, None),
}  # fmt: skip
"""(Memreq, Coresreq, usage (used, usedmem, usedcores), isHAMiCore, the node's hamiVnpuCore,
the check that fails (Go: a bool))."""


@pytest.mark.parametrize(
    ("memory", "cores", "used", "soft", "node_soft", "refused"), FIT.values(), ids=FIT.keys()
)
def test_fit(
    memory: int,
    cores: int,
    used: tuple[int, int, int],
    soft: bool,
    node_soft: bool,
    refused: str | None,
) -> None:
    """``Test_fit``: one 310P NPU (7 slots, 8 AI cores, 21527 MiB) and a request as asked."""
    card = Card("68496E64-20E05477-92C31323-6E78030A-BD003019", 7, 21527, 8, P310.name, True)
    opts = FitOptions(soft_split=soft, node_soft_split=node_soft)
    assert card_refusal(card, CardUse(*used), memory, cores, opts) == refused


# -- TestAscendDevicesFilterNodeErrorClassification ----------------------------------------------

V910A = vnpu_vendor(A910A)
PARTIAL = vnpu_vendor(card_type("Ascend910A", 32768, (Template("vir01", 4096, 1),)))
FILTER = {
    "insufficient device capacity is retryable": (
        V910A, [(1, 32768, 0)], 1, "1/1 CardTimeSlicingExhausted", True),
    "missing device inventory is an error": (V910A, [], 1, "1/0 NodeInsufficientDevice", False),
    "invalid multi-device partial memory request is an error": (
        PARTIAL, [(0, 0, 0)], 2, f"1/1 {PARTIAL_MEMORY}", False),
}  # fmt: skip


@pytest.mark.parametrize(
    ("vendor", "usage", "count", "reason", "retryable"), FILTER.values(), ids=FILTER.keys()
)
def test_filter_node_error_classification(
    vendor: Vendor, usage: list[tuple[int, int, int]], count: int, reason: str, retryable: bool
) -> None:
    """``TestAscendDevicesFilterNodeErrorClassification``: Volcano's ``Unschedulable`` is a
    reason evictions can cure, its ``Error`` one they cannot. The walk itself is asked (with
    one NPU, ``fit_node`` would say ``NodeInsufficientDevice`` before it for two)."""
    limits = {"huawei.com/Ascend910A": float(count), "huawei.com/Ascend910A-memory": 4096.0}
    if count == 1:
        limits["huawei.com/Ascend910A-memory"] = 32768.0
    request = vendor.read_request(limits, {}, DeviceDefaults())
    assert request is not None
    cards = [npu(vendor, f"device-{i + 1}") for i in range(len(usage))]
    opts = vendor.read_options({}, "spread", frozenset())
    assert vendor.walk is not None
    grants, reasons, _ = vendor.walk(
        cards, [CardUse(*u) for u in usage], request, opts, "", NO_GIVEN
    )
    assert grants is None
    assert reason_text(reasons, len(cards)) == reason
    assert all((r in RELEASABLE_REASONS) == retryable for r in reasons)


# -- TestAscendDevice_GetNodeDevices_HAMiVnpuCore ------------------------------------------------

REGISTER_910A = "hami.io/node-register-Ascend910A"
ONE_NPU = '[{"id":"dev-1","index":0,"count":1,"devmem":32768,"devcore":30}]'


@pytest.mark.parametrize(
    ("said", "supports"),
    [
        pytest.param("true", True, id="node_support_hami_vnpu_core"),
        pytest.param("false", False, id="node_not_support_hami_vnpu_core"),
        pytest.param(None, False, id="node_without_hami_vnpu_core_annotation"),
    ],
)
def test_get_node_devices_hami_vnpu_core(said: str | None, supports: bool) -> None:
    """``TestAscendDevice_GetNodeDevices_HAMiVnpuCore``: the node's ``hami-vnpu-core`` outranks
    the configuration (Go's zero one: off)."""
    notes = {REGISTER_910A: ONE_NPU} | ({} if said is None else {"hami-vnpu-core": said})
    cards = node_cards(V910A, NodeView("test-node", notes, {"huawei.com/Ascend910A": 1.0}))
    assert isinstance(cards, tuple) and len(cards) == 1
    assert V910A.read_node is not None
    assert V910A.read_node(notes, FitOptions()).node_soft_split is supports


def test_the_configured_hami_vnpu_core_holds_where_the_node_says_nothing() -> None:
    """``getNodeDevices``: ``VNPUsConfig.HamiVnpuCore`` when the annotation is absent."""
    vendor = vnpu_vendor(A910A, hami_core=True)
    assert vendor.read_node is not None
    assert vendor.read_node({}, FitOptions()).node_soft_split


@pytest.mark.parametrize(
    ("allocatable", "notes", "got"),
    [
        pytest.param(None, {REGISTER_910A: ONE_NPU}, 0, id="no allocatable: no devices"),
        pytest.param(0.0, {REGISTER_910A: ONE_NPU}, 0, id="allocatable 0: no devices"),
        pytest.param(4.0, {REGISTER_910A: ONE_NPU}, 1, id="allocatable and registered"),
        pytest.param(4.0, {}, f"annos not found {REGISTER_910A}", id="annos not found"),
        pytest.param(4.0, {REGISTER_910A: "[]"}, "no device found on node", id="no device found"),
        pytest.param(4.0, {REGISTER_910A: "{oops"}, "not valid JSON", id="unmarshal error"),
    ],
)
def test_new_ascend_devices(
    allocatable: float | None, notes: dict[str, str], got: int | str
) -> None:
    """``NewAscendDevices``: a node has a type's NPUs only when its allocatable counts the
    type's resource; ``getNodeDevices``' errors say why the registration cannot be read."""
    capacity = {} if allocatable is None else {"huawei.com/Ascend910A": allocatable}
    cards = node_cards(V910A, NodeView("n", notes, capacity))
    if isinstance(got, str):
        assert isinstance(cards, str) and got in cards
    else:
        assert not isinstance(cards, str) and len(cards) == got
        assert all(c.type == V910A.name for c in cards)


# -- Test_verifyReq ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nums", "memory", "passes"),
    [
        pytest.param(1, 1024, True, id="single_device_with_partial_memory_should_pass"),
        pytest.param(2, 1024, False, id="multiple_devices_with_partial_memory_should_fail"),
        pytest.param(2, 21527, True, id="multiple_devices_with_full_memory_should_pass"),
    ],
)
def test_verify_req(nums: int, memory: int, passes: bool) -> None:
    """``Test_verifyReq`` on the 310P."""
    assert (verify_request(A310P.npu, nums, memory) is None) is passes


# -- TestAscendDevices_AddResource ---------------------------------------------------------------

A910 = vnpu_vendor(VnpuType(VnpuConfig("", "Ascend910", 32000, 32000, 1, 0, 0, ()),
                            "huawei.com/Ascend910", "huawei.com/Ascend910Memory"))  # fmt: skip
ALLOCATED_910 = "hami.io/Ascend910-devices-allocated"
ADD = {
    "Successfully add single device resource": (
        ["device-1"], ["device-1,Ascend910,16000,50"], {"device-1": (1, 16000, 50)}),
    "Successfully add multiple device resources": (
        ["device-1", "device-2"], ["device-1,Ascend910,8000,25:device-2,Ascend910,8000,25"],
        {"device-1": (1, 8000, 25), "device-2": (1, 8000, 25)}),
    "Add resource to existing device usage - accumulate": (
        ["device-1"], ["device-1,Ascend910,8000,25", "device-1,Ascend910,8000,25"],
        {"device-1": (2, 16000, 50)}),
    "Pod has invalid annotation format": (
        ["device-1"], ["invalid format"], {"device-1": (0, 0, 0)}),
    "Pod missing required annotation": (["device-1"], [None], {"device-1": (0, 0, 0)}),
    "Device not found in devices map": (
        ["device-1"], ["non-existent-device,Ascend910,16000,50"], {"device-1": (0, 0, 0)}),
    "Multiple containers with different devices": (
        ["device-1", "device-2", "device-3"],
        ["device-1,Ascend910,4000,10:device-2,Ascend910,4000,10"],
        {"device-1": (1, 4000, 10), "device-2": (1, 4000, 10), "device-3": (0, 0, 0)}),
    "two containers: both counted, where Volcano's addResource counts the first": (
        ["device-1", "device-2"], ["device-1,Ascend910,4000,10:;device-2,Ascend910,4000,10:;"],
        {"device-1": (1, 4000, 10), "device-2": (1, 4000, 10)}),
}  # fmt: skip
"""(the node's devices, each pod's ``hami.io/Ascend910-devices-allocated``, the usage
expected per device (Used, Usedmem, Usedcores))."""


@pytest.mark.parametrize(("devices", "allocations", "usage"), ADD.values(), ids=ADD.keys())
def test_add_resource(
    devices: list[str], allocations: list[str | None], usage: dict[str, tuple[int, int, int]]
) -> None:
    """``TestAscendDevices_AddResource``: the usage rebuilt from the pods on the node (which,
    as Volcano's ``Allocate`` writes, also carry ``hami.io/vgpu-node``)."""
    register = json.dumps([{"id": d, "count": 1, "devmem": 32000, "devcore": 100} for d in devices])
    view = NodeView(
        "node1", {"hami.io/node-register-Ascend910": register}, {A910.count_resource: 4}
    )
    pods = [
        HeldPod("ns1", f"pod-{i}", "node1", 0, {} if text is None else {
            ALLOCATED_910: text, "hami.io/vgpu-node": "node1"})
        for i, text in enumerate(allocations)
    ]  # fmt: skip
    states, _ = cluster_usage([A910], {"node1": view}, pods)
    got = {s.card.id: (s.use.used, s.use.usedmem, s.use.usedcores) for s in states}
    assert got == usage


# -- TestAllocateAddsNodeLockAscendWhenEnabled, TestHAMiReleaseReturnsSpeculativeAnnotationKeys ---


def test_allocate_adds_node_lock_ascend_when_enabled() -> None:
    """``TestAllocateAddsNodeLockAscendWhenEnabled``: ``hami.io/mutex.lock``, an RFC 3339 time
    alone, taken over after 5 minutes (``nodelock.LockNode``). End to end below."""
    assert (V910A.keys.lock, V910A.bare_lock, V910A.lock_expiry) == (
        "hami.io/mutex.lock",
        True,
        300.0,
    )


def test_hami_release_returns_speculative_annotation_keys() -> None:
    """``TestHAMiReleaseReturnsSpeculativeAnnotationKeys``: what a placement undone takes back
    is what ``Release`` lists for the type."""
    assert set(V910A.written) == {
        "hami.io/vgpu-node",
        "hami.io/vgpu-time",
        "hami.io/bind-phase",
        "hami.io/bind-time",
        "predicate-time",
        "hami.io/Ascend910A-devices-to-allocate",
        "hami.io/Ascend910A-devices-allocated",
        "huawei.com/Ascend910A",
    }


# -- TestCalScore --------------------------------------------------------------------------------

SCORE = {
    "spread rewards idle device": ("spread", (0, 0), 32768, 100.0),
    "devmem is zero": ("spread", (0, 0), 0, 0.0),
    "binpack devmem is zero": ("binpack", (0, 0), 0, 0.0),
    "spread does not reward shared device": ("spread", (1, 0), 32768, 0.0),
    "binpack rewards full device most": ("binpack", (0, 32768), 32768, 100.0),
    "binpack does not reward idle device": ("binpack", (0, 0), 32768, 0.0),
    "binpack scales with memory usage": ("binpack", (0, 16384), 32768, 50.0),
}


@pytest.mark.parametrize(("policy", "used", "devmem", "want"), SCORE.values(), ids=SCORE.keys())
def test_cal_score(policy: str, used: tuple[int, int], devmem: int, want: float) -> None:
    """``TestCalScore``."""
    assert card_score(policy, npu(V910A, "d", devmem=devmem), CardUse(*used)) == want
