"""Ascend NPUs the HAMi way: tables after HAMi's ``pkg/device/ascend/device_test.go``.

Each table names the Go test it follows. The fit cases run for every card type of HAMi's default
device ConfigMap, as ``TestDevices_Fit`` loops over its configs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from caldera.devices.ascend import ASCEND, DEFAULT_CONFIGS, registered_cards
from caldera.devices.fit import NO_GIVEN, CardUse, reason_text
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import Vendor

CONFIGS = {c.common_word: c for c in DEFAULT_CONFIGS}
VENDORS = {v.name: v for v in ASCEND}
SINGLE = [name for name in VENDORS if name != "Ascend910C"]
"""The card types ``TestDevices_Fit`` loops over (910C has ``TestDevices_Fit_910C``)."""


@dataclass(frozen=True)
class Npu:
    """One NPU as ``TestDevices_Fit`` writes its ``DeviceUsage``."""

    uuid: str
    index: int = 0
    count: int = 100
    mem: int = 128
    core: int = 100
    health: bool = True
    network: int | None = None
    used: tuple[int, int, int] = (0, 0, 0)
    """(containers, memory, cores) in use."""


@dataclass(frozen=True)
class FitCase:
    npus: list[Npu]
    request: tuple[int, int, int, int]
    """(nums, memreq, memory percentage, coresreq)."""
    chosen: list[str] | None
    reason: str = ""
    pod: dict[str, str] = field(default_factory=dict)
    node: dict[str, str] = field(default_factory=dict)


def fit(vendor: Vendor, case: FitCase) -> tuple[list[str] | None, str]:
    """``Devices.Fit`` of one container: the NPUs chosen (None: none) and HAMi's reason."""
    cards = [
        Card(n.uuid, n.count, n.mem, n.core, vendor.name, n.health, n.index, network=n.network)
        for n in case.npus
    ]
    nums, mem, percentage, cores = case.request
    request = CardRequest(vendor.name, nums, mem, percentage, cores)
    opts = vendor.read_options(case.pod, "spread", frozenset())
    assert vendor.read_node is not None
    opts = vendor.read_node(case.node, opts)
    uses = [CardUse(*n.used) for n in case.npus]
    assert vendor.walk is not None
    grants, reasons, out_of = vendor.walk(cards, uses, request, opts, vendor.name, NO_GIVEN)
    why = reason_text(reasons, len(cards) if out_of is None else out_of) if grants is None else ""
    return (None if grants is None else [g.uuid for g in grants]), why


TWO = [Npu("dev-0"), Npu("dev-1")]
SOFT = {"huawei.com/vnpu-mode": "hami-core"}

FIT_CASES = {
    "fit success": FitCase(TWO, (1, 64, 0, 50), ["dev-1"]),
    "fit fail: memory not enough": FitCase(
        [Npu("dev-0")], (1, 512, 0, 50), None, "1/1 CardInsufficientMemory"
    ),
    "fit fail: core not enough": FitCase(
        [Npu("dev-0", used=(1, 0, 80))], (1, 64, 0, 50), None, "1/1 CardInsufficientCore"
    ),
    "fit fail: user assign use uuid mismatch": FitCase(
        [Npu("dev-1")], (1, 64, 0, 50), None, "1/1 CardUuidMismatch", pod={"use": "dev-0"}
    ),
    "fit fail: user assign no use uuid match": FitCase(
        [Npu("dev-0")], (1, 64, 0, 50), None, "1/1 CardUuidMismatch", pod={"no-use": "dev-0"}
    ),
    "fit fail: card overused": FitCase(
        [Npu("dev-0", count=1, used=(1, 0, 0))],
        (1, 64, 0, 50),
        None,
        "1/1 CardTimeSlicingExhausted",
    ),
    "fit success: but core limit can't exceed 100": FitCase(
        [Npu("dev-0")], (1, 64, 0, 120), ["dev-0"]
    ),
    "fit fail: card exclusively": FitCase(
        [Npu("dev-0", used=(1, 0, 0))], (1, 64, 0, 100), None, "1/1 ExclusiveDeviceAllocateConflict"
    ),
    "fit fail: CardComputeUnitsExhausted": FitCase(
        [Npu("dev-0", used=(1, 0, 100))], (1, 64, 0, 0), None, "1/1 CardComputeUnitsExhausted"
    ),
    "fit fail: CardNotHealth": FitCase(
        [Npu("dev-0", health=False)], (1, 64, 0, 50), None, "1/1 CardNotHealth"
    ),
    "fit success: memory percentage": FitCase([Npu("dev-0")], (1, 0, 10, 50), ["dev-0"]),
    "fit fail: partial allocation AllocatedCardsInsufficientRequest for multiple cards": FitCase(
        [Npu("dev-0", mem=1280), Npu("dev-1", index=1, mem=1280)],
        (3, 512, 0, 20),
        None,
        "2/2 AllocatedCardsInsufficientRequest",
    ),
    "fit fail: hami-core pod on legacy node (ModeNotFit)": FitCase(
        [Npu("dev-0")], (1, 64, 0, 50), None, "1/1 ModeNotFit", pod=SOFT
    ),
    "fit ok: annotation-less pod on hami-core node follows node": FitCase(
        [Npu("dev-0")], (1, 64, 0, 50), ["dev-0"], node={"hami-vnpu-core": "true"}
    ),
    "fit success: whole-card hami-core pod on hami-core node": FitCase(
        [Npu("dev-0", core=8)],
        (1, 0, 100, 100),
        ["dev-0"],
        pod=SOFT,
        node={"hami-vnpu-core": "true"},
    ),
    "mutex policy rejects used device": FitCase(
        [Npu("dev-0", used=(1, 10, 10))],
        (1, 64, 0, 10),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
        pod={"hami.io/gpu-scheduler-policy": "mutex"},
    ),
}


def _with_selectors(case: FitCase, word: str) -> FitCase:
    """The Go test sets ``hami.io/use-<word>-uuid`` and ``no-use`` for the card type under test."""
    pod = {
        (
            f"hami.io/use-{word}-uuid"
            if k == "use"
            else f"hami.io/no-use-{word}-uuid"
            if k == "no-use"
            else k
        ): v
        for k, v in case.pod.items()
    }
    return FitCase(case.npus, case.request, case.chosen, case.reason, pod, case.node)


@pytest.mark.parametrize("word", SINGLE)
@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_devices_fit(word: str, case: FitCase) -> None:
    got = fit(VENDORS[word], _with_selectors(case, word))
    assert got == (case.chosen, case.reason)


NETWORK_CASES = {
    "fit success. schedule by NetworkID": (
        FitCase(
            [Npu("dev-0", network=0), Npu("dev-1", network=1), Npu("dev-2", network=1)],
            (2, 64, 0, 50),
            ["dev-2", "dev-1"],
        ),
        ["dev-2", "dev-1"],
    ),
    "computeBestCombination: the network with most fitting NPUs is filled first": (
        FitCase(
            [
                Npu("dev-0", network=0),
                Npu("dev-1", network=0),
                Npu("dev-2", network=1),
                Npu("dev-3", network=0),
            ],
            (2, 64, 0, 50),
            ["dev-3", "dev-1"],
        ),
        ["dev-3", "dev-2"],
    ),
    "one NPU asked: the first fitting one": (
        FitCase([Npu("dev-0", network=0), Npu("dev-1", network=1)], (1, 64, 0, 50), ["dev-1"]),
        ["dev-1"],
    ),
}


@pytest.mark.parametrize(("word", "networked"), [(w, w.startswith("Ascend910")) for w in SINGLE])
@pytest.mark.parametrize("case", NETWORK_CASES.values(), ids=NETWORK_CASES.keys())
def test_devices_fit_by_network_id(
    word: str, networked: bool, case: tuple[FitCase, list[str]]
) -> None:
    """On 910 cards that all carry a NetworkID every fitting NPU is collected and
    ``computeBestCombination`` chooses; other card types take the first ones the walk meets."""
    on_network, plain = case
    got, _ = fit(VENDORS[word], on_network)
    assert got == (on_network.chosen if networked else plain)


FIT_910C = {
    "fit success: Ascend910C topology-aware allocation (full modules only)": FitCase(
        [
            Npu("dev-0", index=0, network=0),
            Npu("dev-1", index=1, network=0),
            Npu("dev-2", index=2, network=0),
        ],
        (2, 128, 0, 100),
        ["dev-1", "dev-0"],
    ),
    "computeBestCombination910C: a module with one free NPU is not taken": FitCase(
        [Npu("dev-0", index=0), Npu("dev-1", index=1, health=False), Npu("dev-2", index=2)],
        (2, 64, 0, 10),
        None,
        "0/2 AllocatedCardsInsufficientRequest, 1/2 CardNotHealth",
    ),
    "one NPU is walked as on any card": FitCase(
        [Npu("dev-0", index=0), Npu("dev-1", index=1)], (1, 64, 0, 10), ["dev-1"]
    ),
}


@pytest.mark.parametrize("case", FIT_910C.values(), ids=FIT_910C.keys())
def test_devices_fit_910c(case: FitCase) -> None:
    assert fit(VENDORS["Ascend910C"], case) == (case.chosen, case.reason)


# -- Test_GetNodeDevices: the registration -------------------------------------------------------


def test_get_node_devices_reads_hamis_json_as_go_does() -> None:
    text = (
        '[{"ID":"GPU-0","Count":4,"Devmem":8738,"Devcore":8,"Type":"huawei.com/Ascend910",'
        '"Numa":0,"Health":true,"custominfo":{"NetworkID":3}},'
        '{"id":"GPU-1","index":1,"count":4,"devmem":8738,"devcore":8,"type":"huawei.com/Ascend910",'
        '"health":false}]'
    )
    assert registered_cards(text) == [
        Card("GPU-0", 4, 8738, 8, "huawei.com/Ascend910", True, mode="", network=3),
        Card("GPU-1", 4, 8738, 8, "huawei.com/Ascend910", False, index=1, mode=""),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("[]", "no device found on node", id="an empty list: no device found"),
        pytest.param("{oops", "not valid JSON", id="not JSON"),
        pytest.param('[{"Devmem": "x"}]', "[0].devmem: expected an integer", id="a bad field"),
    ],
)
def test_get_node_devices_refuses_what_go_refuses(text: str, says: str) -> None:
    with pytest.raises(RegistrationError, match=says.replace("[", r"\[").replace("]", r"\]")):
        registered_cards(text)


# -- Test_GenerateResourceRequests ---------------------------------------------------------------

A910A = VENDORS["Ascend910A"]


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        pytest.param({}, None, id="don't set to limits and request"),
        pytest.param(
            {"huawei.com/Ascend910A": 2, "huawei.com/Ascend910A-memory": 8738},
            CardRequest("Ascend910A", 2, 8738, 0, 0),
            id="resourcename and resourcememoryname set to limits and request",
        ),
        pytest.param(
            {"huawei.com/Ascend910A": 2},
            CardRequest("Ascend910A", 2, 0, 100, 0),
            id="resourcememoryname don't set to limits and requests",
        ),
        pytest.param(
            {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-core": 4},
            CardRequest("Ascend910A", 1, 0, 100, 4),
            id="the core resource is read as AI cores",
        ),
        pytest.param({"huawei.com/Ascend910A": 0}, None, id="OutOfRangeValues: a zero count"),
        pytest.param(
            {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": -1},
            None,
            id="OutOfRangeValues: negative memory",
        ),
        pytest.param(
            {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-memory": 16 * 2**30},
            None,
            id="OutOfRangeValues: 16Gi is bytes, not MiB",
        ),
        pytest.param(
            {"huawei.com/Ascend910A": 1, "huawei.com/Ascend910A-core": -2},
            None,
            id="OutOfRangeValues: negative cores",
        ),
    ],
)
def test_generate_resource_requests(limits: dict[str, float], expected: CardRequest | None) -> None:
    assert A910A.read_request(limits, {}, DeviceDefaults()) == expected
    assert A910A.read_request({}, limits, DeviceDefaults()) == expected  # requests as well


# -- Test_PatchAnnotations -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "grant", "runtime"),
    [
        pytest.param(
            {},
            Grant("device-0", "Ascend910A", 8738, 1),
            [{"UUID": "device-0", "temp": "vir08", "memory": 8738, "core": 1}],
            id="exist device: a hard split names the template its memory rounds up to",
        ),
        pytest.param(
            {"huawei.com/vnpu-mode": "hami-core"},
            Grant("device-0", "Ascend910A", 4096, 30),
            [{"UUID": "device-0", "memory": 4096, "core": 30}],
            id="VNPUCoreMode: a soft split names no template",
        ),
        pytest.param(
            {},
            Grant("device-0", "Ascend910A", 2000, 0),
            [{"UUID": "device-0", "temp": "vir02", "memory": 2000}],
            id="ZeroCore: Go leaves a zero core out",
        ),
    ],
)
def test_patch_annotations(pod: dict[str, str], grant: Grant, runtime: list[object]) -> None:
    got = A910A.bind_annotations("n1", [[grant]], 1_800_000_000.0, pod)
    allocation = f"{grant.uuid},Ascend910A,{grant.memory},{grant.cores}:;"
    assert got["hami.io/Ascend910A-devices-to-allocate"] == allocation
    assert got["hami.io/Ascend910A-devices-allocated"] == allocation
    assert got["predicate-time"] == "1800000000"
    assert json.loads(got["huawei.com/Ascend910A"]) == runtime
    assert got["huawei.com/Ascend910A"] == json.dumps(runtime, separators=(",", ":"))
    assert set(got) == set(A910A.written)


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        pytest.param(1, (2184, "vir02"), id="the smallest template that holds it"),
        pytest.param(4369, (4369, "vir04"), id="a template's own size is that template"),
        pytest.param(17477, (32768, ""), id="above every template: the whole card"),
        pytest.param(32769, (0, ""), id="above the card: nothing"),
    ],
)
def test_trim_memory(memory: int, expected: tuple[int, str]) -> None:
    assert CONFIGS["Ascend910A"].trim_memory(memory) == expected


def test_every_card_type_of_hamis_device_configmap_is_a_vendor() -> None:
    assert list(VENDORS) == [
        "Ascend910A",
        "Ascend910B2",
        "Ascend910B3",
        "Ascend910B4-1",
        "Ascend910B4",
        "Ascend310P",
        "Ascend910C",
    ]
    for word, vendor in VENDORS.items():
        assert vendor.register_annotation == f"hami.io/node-register-{word}"
        assert vendor.resources == {
            f"huawei.com/{word}",
            f"huawei.com/{word}-memory",
            f"huawei.com/{word}-core",
        }
        assert vendor.keys.lock == "hami.io/mutex.lock"
