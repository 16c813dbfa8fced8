"""AWS Neuron devices the HAMi way: tables after HAMi's ``pkg/device/awsneuron/device_test.go``.

Each table names the Go test it follows and each row its Go case. ``Test_MutateAdmission`` has no
counterpart: Caldera runs no per-vendor admission webhook (its checks are the request's,
``Test_GenerateResourceRequests`` and ``Test_splitCoreRequest``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from caldera.devices.awsneuron import (
    AWS_NEURON,
    NeuronGrant,
    add_core_usage,
    capacity_cards,
    container_request,
    graph_select,
    mask_cores,
    neuron_annotations,
    neuron_request,
    pod_options,
    split_core_request,
    walk,
)
from caldera.devices.fit import CardUse, fit_node
from caldera.devices.model import Card, Grant, NodeView, RegistrationError
from caldera.devices.vendor import BindPod
from caldera.devices.vendors import node_cards
from devices_cases import verdict

NEURON, CORE = "aws.amazon.com/neuron", "aws.amazon.com/neuroncore"


def test_get_node_devices() -> None:
    """``Test_GetNodeDevices``, "get node device": one device of two cores on an inf2 node."""
    got = capacity_cards(
        "test", {}, {NEURON: 1, CORE: 2}, {"node.kubernetes.io/instance-type": "inf2"}
    )
    assert got == [Card("test-AWSNeuron-0", 2, 0, 3, "AWSNeuron", True, 0, 0, "inf2")]


@pytest.mark.parametrize(
    "capacity",
    [
        pytest.param({CORE: 2.0}, id="no neuron capacity"),
        pytest.param({NEURON: 0.0, CORE: 0.0}, id="counts == 0"),
        pytest.param({NEURON: 1.5, CORE: 2.0}, id="AsInt64 fails"),
    ],
)
def test_a_node_without_a_device_count_is_device_not_found(capacity: dict[str, float]) -> None:
    """``GetNodeDevices``: ``!ok || counts == 0``."""
    with pytest.raises(RegistrationError, match=r"device not found aws\.amazon\.com/neuron"):
        capacity_cards("test", {}, capacity)


def test_a_trainium_node_lists_every_device_with_its_cores_as_a_mask() -> None:
    """``GetNodeDevices`` on a trn1.32xlarge: 16 devices of 2 cores, named after the node,
    read from its capacity; the node's instance-type label reaches the reader through the
    vendor seam and is kept as each device's ``AWSNodeType``."""
    labels = {"node.kubernetes.io/instance-type": "trn1.32xlarge", "zone": "a"}
    got = node_cards(AWS_NEURON, NodeView("trn-a", {}, {NEURON: 16, CORE: 32}, labels))
    assert not isinstance(got, str)
    assert [c.id for c in got[:2]] == ["trn-a-AWSNeuron-0", "trn-a-AWSNeuron-1"]
    assert {(c.count, c.devcore, c.devmem, c.type, c.mode) for c in got} == {
        (2, 3, 0, "AWSNeuron", "trn1.32xlarge")
    }
    unlabelled = node_cards(AWS_NEURON, NodeView("trn-b", {}, {NEURON: 16, CORE: 32}))
    assert not isinstance(unlabelled, str) and {c.mode for c in unlabelled} == {""}


def test_a_node_without_core_capacity_has_devices_of_no_cores() -> None:
    """``coresTotal`` 0: ``coresPerAWSNeuron`` 0, an empty mask, no sharing slot."""
    got = capacity_cards("test", {}, {NEURON: 2})
    assert [(c.count, c.devcore) for c in got] == [(0, 0), (0, 0)]


def grant(uuid: str, index: int, cores: int, by_device: bool) -> NeuronGrant:
    return NeuronGrant(uuid, "AWSNeuron", 0, cores, None, index, 2, by_device)


PATCH_CASES = {
    "neuron device": (
        [[grant("test1", 0, 3, True), grant("test2", 1, 3, True)]],
        "test1,AWSNeuron,0,3:test2,AWSNeuron,0,3:;",
        {"AWS_NEURON_IDS": "0,1", "aws.amazon.com/predicate-node": ""},
    ),
    "neuroncore device": (
        [[grant("test1", 0, 3, False)]],
        "test1,AWSNeuron,0,3:;",
        {
            "AWS_NEURON_IDS": "0,1",
            "aws.amazon.com/predicate-node": "",
            "NEURON_RESOURCE_TYPE": CORE,
        },
    ),
    "init container neuron device": (
        [[grant("test1", 0, 3, True)], []],
        "test1,AWSNeuron,0,3:;;",
        {"AWS_NEURON_IDS": "0", "aws.amazon.com/predicate-node": ""},
    ),
}


@pytest.mark.parametrize(
    ("containers", "allocation", "want"), PATCH_CASES.values(), ids=PATCH_CASES.keys()
)
def test_patch_annotations(
    containers: list[list[Grant]], allocation: str, want: dict[str, str]
) -> None:
    """``Test_PatchAnnotations`` (``coresPerAWSNeuron`` 2): device indexes for a container whose
    limits name ``aws.amazon.com/neuron``, else the cores of the mask's bits, and the core
    resource named. The predicate node is the one the devices are on (none in these ids, as
    none in the Go test's input). The Go test's own allocation string is never compared (it
    reads ``result["AWSNeuron"]``); this is ``EncodePodSingleDevice``'s."""
    got = AWS_NEURON.bind_annotations("node-1", containers, 1700000000.5)
    assert got["hami.io/aws-neuron-devices-allocated"] == allocation
    assert {k: got[k] for k in want} == want
    assert ("NEURON_RESOURCE_TYPE" in got) is ("NEURON_RESOURCE_TYPE" in want)
    assert got["NEURON_ALLOCATED"] == "false"
    assert got["NEURON_ALLOC_TIME"] == "1700000000500000000"
    assert "hami.io/aws-neuron-devices-to-allocate" not in got  # only SupportDevices


def test_patch_annotations_names_the_node_and_each_core() -> None:
    """``PatchAnnotations`` on a node's devices: ``coresPerAWSNeuron * Idx`` for mask bit 1,
    ``+ 1`` for bit 2, gathered over the containers in order."""
    containers = [
        [grant("trn-a-AWSNeuron-15", 15, 1, False)],
        [grant("trn-a-AWSNeuron-15", 15, 2, False)],
    ]
    got = neuron_annotations(BindPod({}), containers, 0.0)
    assert got["AWS_NEURON_IDS"] == "30,31"
    assert got["aws.amazon.com/predicate-node"] == "trn-a"


def test_the_bind_keys_are_hamis() -> None:
    """``InitAWSNeuronDevice`` registers only ``SupportDevices``; ``LockNode`` takes no lock."""
    assert AWS_NEURON.keys.lock == ""
    assert set(AWS_NEURON.bind_annotations("n", [[grant("n-AWSNeuron-0", 0, 1, False)]], 0)) == {
        "hami.io/vgpu-node",
        "hami.io/vgpu-time",
        "hami.io/aws-neuron-devices-allocated",
        "hami.io/bind-phase",
        "hami.io/bind-time",
        "AWS_NEURON_IDS",
        "NEURON_ALLOC_TIME",
        "NEURON_ALLOCATED",
        "aws.amazon.com/predicate-node",
        "NEURON_RESOURCE_TYPE",
    }


TWO_CORES = Card("n-AWSNeuron-0", 2, 0, 3, "AWSNeuron", True, 0)
"""A device of two cores, as ``coresPerAWSNeuron = 2`` makes the Go tests' requests."""

REQUESTS: dict[str, tuple[dict[str, float], dict[str, float], tuple[int, int, bool] | None]] = {
    "allocate neuron device": ({NEURON: 1}, {NEURON: 1}, (1, 2, True)),
    "reject request-only neuron number that overflows device count when admission is bypassed": (
        {},
        {NEURON: 2.0**31},
        None,
    ),
    "allocate neuron core": ({CORE: 1}, {CORE: 1}, (1, 1, False)),
    "reject odd neuron core request when admission is bypassed": ({CORE: 3}, {CORE: 3}, None),
    "reject request-only odd neuron core request when admission is bypassed": (
        {},
        {CORE: 3},
        None,
    ),
    "reject zero neuron core request when admission is bypassed": ({CORE: 0}, {}, None),
    "reject negative neuron core request when admission is bypassed": ({CORE: -2}, {}, None),
    "reject neuron core request that overflows device count when admission is bypassed": (
        {CORE: 2.0**32},
        {},
        None,
    ),
}


@pytest.mark.parametrize(("limits", "requests", "want"), REQUESTS.values(), ids=REQUESTS.keys())
def test_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], want: tuple[int, int, bool] | None
) -> None:
    """``Test_GenerateResourceRequests``: (Nums, Coresreq on a two-core device, asked by
    ``neuron`` limits), or the empty request."""
    got = container_request(limits, requests)
    assert (None if got is None else (got.nums, got.cores_on(TWO_CORES), got.by_device)) == want


def test_a_neuron_count_in_requests_only_asks_for_whole_devices_by_cores() -> None:
    """``resourceQuantity`` falls back to the requests; ``PatchAnnotations`` reads the limits, so
    such a container is handed core indexes."""
    got = container_request({}, {NEURON: 2})
    assert got is not None and (got.nums, got.cores, got.by_device) == (2, None, False)


def test_an_invalid_count_does_not_fall_back_to_cores() -> None:
    """``GenerateResourceRequests`` returns the empty request once the count is named."""
    assert container_request({NEURON: 0, CORE: 1}, {}) is None


SPLITS: dict[str, tuple[int, int, tuple[int, int] | str]] = {
    "single core takes one device": (2, 1, (1, 1)),
    "a full device is one device": (2, 2, (1, 2)),
    "whole devices divide evenly": (2, 6, (3, 2)),
    "odd count above one has no representable shape": (
        2,
        3,
        "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3",
    ),
    "per-device cores above the addressable limit are bounded": (4, 4, (2, 2)),
    "unknown per-device cores falls back to the addressable limit": (0, 4, (2, 2)),
    "device count stays within int32": (
        1,
        2**31,
        (
            "aws.amazon.com/neuroncore needs 2147483648 devices, which exceeds the maximum of "
            "2147483647"
        ),
    ),
}


@pytest.mark.parametrize(("observed", "cores", "want"), SPLITS.values(), ids=SPLITS.keys())
def test_split_core_request(observed: int, cores: int, want: tuple[int, int] | str) -> None:
    """``Test_splitCoreRequest``: (devices, cores each) at ``observed`` cores per device."""
    if isinstance(want, str):
        with pytest.raises(ValueError, match=want):
            split_core_request(cores, observed)
    else:
        assert split_core_request(cores, observed) == want


@pytest.mark.parametrize(
    ("mask", "cores"),
    [
        pytest.param(3, 2, id="test 3"),
        pytest.param(2, 1, id="test 2"),
        pytest.param(1, 1, id="test 1"),
        pytest.param(0, 0, id="test 0"),
    ],
)
def test_count_mask_available(mask: int, cores: int) -> None:
    """``Test_countMaskAvailable``."""
    assert mask_cores(mask) == cores


@pytest.mark.parametrize(
    ("used", "require", "mask"),
    [
        pytest.param(0, 2, 3, id="an unused device, two cores: both"),
        pytest.param(0, 1, 1, id="an unused device, one core: the first"),
        pytest.param(1, 1, 2, id="the first core taken: the second"),
        pytest.param(2, 1, 1, id="the second core taken: the first"),
        pytest.param(0, 4, 3, id="four cores asked: still a two-bit mask"),
    ],
)
def test_add_core_usage(used: int, require: int, mask: int) -> None:
    """``addCoreUsage``: the mask of the cores a share takes."""
    assert add_core_usage(used, require) == mask


def sixteen(used: frozenset[int] = frozenset()) -> list[tuple[int, bool]]:
    """``makeDeviceUsages``: 16 healthy devices, ``used`` in use."""
    return [(1 if i in used else 0, True) for i in range(16)]


GRAPH_CASES = {
    "full allocate": ("inf2", sixteen(), 16, list(range(16))),
    "8 allocate fail": ("trn", sixteen(frozenset({7, 13})), 8, []),
    "8 allocate success": ("trn", sixteen(frozenset({7})), 8, list(range(8, 16))),
    "8 allocate": ("inf", sixteen(frozenset({5, 14})), 8, list(range(6, 14))),
}


@pytest.mark.parametrize(
    ("instance", "slots", "count", "want"), GRAPH_CASES.values(), ids=GRAPH_CASES.keys()
)
def test_graph_select(
    instance: str, slots: list[tuple[int, bool]], count: int, want: list[int]
) -> None:
    """``Test_graphSelect``: a run anywhere on ``inf`` instances, aligned runs elsewhere."""
    assert graph_select(instance, slots, count) == want


def test_graph_select_takes_no_run_of_two_off_inf_instances() -> None:
    """``graphSelect``'s ``switch count``: only 1, 4, 8 and 16 off ``inf``."""
    assert graph_select("trn1.32xlarge", sixteen(), 2) == []
    assert graph_select("inf2.48xlarge", sixteen(frozenset({0})), 2) == [1, 2]


@dataclass(frozen=True)
class Usage:
    """``makeAWSDeviceUsage``'s device."""

    id: str
    index: int = 0
    used: int = 0
    count: int = 2
    totalcore: int = 3
    usedcores: int = 0
    node_type: str = "trn"
    health: bool = True

    def card(self) -> Card:
        return Card(
            self.id,
            self.count,
            0,
            self.totalcore,
            "AWSNeuron",
            self.health,
            self.index,
            0,
            self.node_type,
        )


@dataclass(frozen=True)
class FitCase:
    devices: list[Usage]
    request: tuple[int, int]
    """(Nums, Coresreq)."""
    chosen: list[str] | None
    reason: str = ""
    pod: dict[str, str] = field(default_factory=dict)
    vendor: str = "AWSNeuron"


FIT_CASES = {
    "fit success": FitCase([Usage("dev-0"), Usage("dev-1", count=12)], (1, 2), ["dev-1"]),
    "fit fail: memory not enough": FitCase([Usage("dev-0")], (2, 2), None, "1/1 NumaNotFit"),
    "fit fail: core not enough": FitCase(
        [Usage("dev-0", usedcores=1)], (1, 2), None, "1/1 CardInsufficientCore"
    ),
    "fit fail: type mismatch": FitCase(
        [Usage("dev-0")], (1, 2), None, "1/1 CardTypeMismatch", vendor="OtherType"
    ),
    "fit fail: user assign use uuid mismatch": FitCase(
        [Usage("dev-1")],
        (1, 2),
        None,
        "1/1 CardUuidMismatch",
        pod={"aws.amazon.com/use-neuron-uuid": "dev-0"},
    ),
    "fit fail: user assign no use uuid match": FitCase(
        [Usage("dev-0")],
        (1, 2),
        None,
        "1/1 CardUuidMismatch",
        pod={"aws.amazon.com/nouse-neuron-uuid": "dev-0"},
    ),
    "fit fail: card overused": FitCase(
        [Usage("dev-0", used=2)], (1, 2), None, "1/1 CardTimeSlicingExhausted"
    ),
    "mutex policy rejects used device": FitCase(
        [Usage("dev-0", used=1)],
        (1, 2),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
        pod={"hami.io/gpu-scheduler-policy": "mutex"},
    ),
    "fit fail: NumaNotFit with multiple devices": FitCase(
        [Usage("dev-0"), Usage("dev-1", index=1)], (2, 2), None, "1/2 NumaNotFit"
    ),
    "fit fail: CardNotHealth": FitCase(
        [Usage("dev-0", health=False)], (1, 2), None, "1/1 CardNotHealth"
    ),
}


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_devices_fit(case: FitCase) -> None:
    """``TestDevices_Fit``, the Go test's ``Fit`` called directly (so before ``fitInDevices``'
    ``NodeInsufficientDevice``); Neuron's card scores are all 0, so HAMi's order is the list's."""
    cards = [d.card() for d in case.devices]
    nums, cores = case.request
    grants, reasons, _ = walk(
        cards,
        [CardUse(d.used, 0, d.usedcores) for d in case.devices],
        neuron_request(nums, cores, vendor=case.vendor),
        pod_options(case.pod, "spread", frozenset()),
        "AWSNeuron",
    )
    assert verdict(grants, reasons, len(cards)) == (case.chosen, case.reason)


@pytest.mark.parametrize(
    ("vendor", "chosen"),
    [
        pytest.param("AWSNeuron", ["dev-0"], id="the same type"),
        pytest.param("test111", None, id="the different type"),
    ],
)
def test_check_type(vendor: str, chosen: list[str] | None) -> None:
    """``Test_checkType`` ("the different type": ``CardTypeMismatch``)."""
    grants, _, _ = walk(
        [Usage("dev-0").card()],
        [CardUse()],
        neuron_request(1, 1, vendor=vendor),
        pod_options({}, "spread", frozenset()),
        "AWSNeuron",
    )
    assert (None if grants is None else [g.uuid for g in grants]) == chosen


TRN = capacity_cards(
    "trn-a", {}, {NEURON: 16, CORE: 32}, {"node.kubernetes.io/instance-type": "trn1"}
)


def uses(used: dict[int, tuple[int, int]]) -> list[CardUse]:
    """(containers, core mask) in use per device index."""
    return [CardUse(*used.get(i, (0, 0))) for i in range(16)]


def test_one_core_then_the_other_of_the_last_device() -> None:
    """``Fit`` from the end of the list: device 15's first core, then its second
    (``addCoreUsage``: ``3 - used``), then device 14 whole; through :func:`fit_node`."""
    one = container_request({CORE: 1}, {})
    whole = container_request({NEURON: 1}, {})
    got = fit_node(
        TRN,
        uses({}),
        [(False, one), (False, one), (False, whole)],
        pod_options({}, "spread", frozenset()),
        "AWSNeuron",
        walk,
    )
    assert got.grants is not None
    assert [(g.uuid, g.cores) for c in got.grants for g in c] == [
        ("trn-a-AWSNeuron-15", 1),
        ("trn-a-AWSNeuron-15", 2),
        ("trn-a-AWSNeuron-14", 3),
    ]
    annotations = AWS_NEURON.bind_annotations("trn-a", got.grants, 0.0)
    assert annotations["AWS_NEURON_IDS"] == "30,31,14"


def test_eight_devices_take_an_aligned_free_run() -> None:
    """``graphSelect`` on a Trainium node: device 3 in use, so devices 8-15, each whole."""
    request = container_request({NEURON: 8}, {})
    got = fit_node(
        TRN,
        uses({3: (1, 1)}),
        [(False, request)],
        pod_options({}, "spread", frozenset()),
        "AWSNeuron",
        walk,
    )
    assert got.grants is not None
    assert [(g.uuid, g.memory, g.cores) for g in got.grants[0]] == [
        (f"trn-a-AWSNeuron-{i}", 0, 3) for i in range(8, 16)
    ]


def test_two_devices_off_inf_instances_are_numa_not_fit() -> None:
    """``graphSelect``: a run of 2 is none of 1, 4, 8, 16."""
    request = container_request({NEURON: 2}, {})
    got = fit_node(
        TRN, uses({}), [(False, request)], pod_options({}, "spread", frozenset()), "AWSNeuron", walk
    )
    assert got.grants is None
    assert got.reason == "1/16 NumaNotFit"


def test_under_mutex_the_run_is_found_among_positions_and_taken_by_index() -> None:
    """``Fit`` looks the run up in the sorted list (busiest first under ``mutex``; equal devices
    in registration order) and takes the devices whose ``Index`` are those positions: with
    device 12 in use, positions 8-15 are free, and device 12 is among the devices taken (HAMi
    mixes positions and indexes; kept)."""
    request = container_request({NEURON: 8}, {})
    opts = pod_options({"hami.io/gpu-scheduler-policy": "mutex"}, "spread", frozenset())
    got = fit_node(TRN, uses({12: (1, 1)}), [(False, request)], opts, "AWSNeuron", walk)
    assert got.grants is not None
    assert [g.uuid for g in got.grants[0]] == [f"trn-a-AWSNeuron-{i}" for i in range(8, 16)]


def test_a_ring_on_inf_instances() -> None:
    """``graphSelect`` on an ``inf2`` node: a run of 3 may start anywhere free."""
    inf = capacity_cards(
        "inf-a", {}, {NEURON: 6, CORE: 12}, {"node.kubernetes.io/instance-type": "inf2.24xlarge"}
    )
    request = container_request({NEURON: 3}, {})
    used = [CardUse(1 if i == 1 else 0, 1 if i == 1 else 0) for i in range(6)]
    got = fit_node(
        inf, used, [(False, request)], pod_options({}, "spread", frozenset()), "AWSNeuron", walk
    )
    assert got.grants is not None
    assert [g.uuid for g in got.grants[0]] == [
        "inf-a-AWSNeuron-2",
        "inf-a-AWSNeuron-3",
        "inf-a-AWSNeuron-4",
    ]
