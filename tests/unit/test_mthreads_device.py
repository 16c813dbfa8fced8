"""Moore Threads GPUs the HAMi way: tables after HAMi's ``pkg/device/mthreads/device_test.go``.

Each test names the Go test it follows; each row is named by its Go case, or by the rule of
``device.go`` it pins where the Go test has no row for it. ``Test_MutateAdmission`` is HAMi's
webhook, not its scheduler, and has no table here.
"""

from __future__ import annotations

import re

import pytest

from caldera.devices.fit import CardUse, Given, Quota, fit_node, pod_usage
from caldera.devices.model import Card, CardRequest, Grant, NodeView, RegistrationError
from caldera.devices.mthreads import (
    MTHREADS,
    capacity_cards,
    container_request,
    custom_filter_rule,
    mthreads_annotations,
    mthreads_walk,
)
from caldera.devices.vendor import BindPod
from caldera.devices.vendors import CAPACITY_NAMES, FAMILIES, VENDORS, node_cards
from devices_cases import MUTEX, FitCase, Gpu, Verdict, hami_fit_cases, walk_fit

COUNT, MEMORY, CORES = "mthreads.com/vgpu", "mthreads.com/sgpu-memory", "mthreads.com/sgpu-core"
ALLOCATED = "hami.io/mthreads-vgpu-devices-allocated"


# -- Test_GetNodeDevices ---------------------------------------------------------------------


def test_get_node_devices() -> None:
    """``Test_GetNodeDevices`` "get node device": 1 core and 1 memory unit give one card of
    8192 MiB (``1 * 512 * 16 / 1``)."""
    cards = capacity_cards("test", {}, {MEMORY: 1, CORES: 1})
    assert cards == [Card("test-mthreads-0", 100, 8192, 16, "Mthreads", True, index=0)]


@pytest.mark.parametrize(
    ("capacity", "ids", "devmem"),
    [
        ({CORES: 64, MEMORY: 384}, [0, 1, 2, 3], 384 * 512 * 16 // 64),
        ({CORES: 20, MEMORY: 60}, [0, 1], 60 * 512 * 16 // 20),
        ({CORES: 32}, [0, 1], 0),
        ({CORES: 16, MEMORY: 96.5}, [0], 0),
        ({CORES: -16, MEMORY: 96}, [], 0),
    ],
    ids=[
        "a card per 16 cores, the memory split by cores",
        "the cores left over make one more card",
        "no memory capacity: cards of 0 MiB",
        "memory not a whole number is not read (AsInt64)",
        "negative cores: no card and no error",
    ],
)
def test_get_node_devices_counts_cards_by_sixteen_cores(
    capacity: dict[str, float], ids: list[int], devmem: int
) -> None:
    """``GetNodeDevices``: ``for i*16 < cores``, ``Devmem = int32(memoryTotal*512*16/cores)``."""
    cards = capacity_cards("n1", {}, capacity)
    assert [c.id for c in cards] == [f"n1-mthreads-{i}" for i in ids]
    assert [c.index for c in cards] == ids
    assert {c.devmem for c in cards} <= {devmem}
    assert all((c.count, c.devcore, c.type, c.health) == (100, 16, "Mthreads", True) for c in cards)


@pytest.mark.parametrize(
    "capacity",
    [{MEMORY: 96}, {CORES: 0, MEMORY: 96}, {CORES: 1.5}],
    ids=["no core capacity", "zero cores", "cores not a whole number"],
)
def test_a_node_without_cores_has_no_card(capacity: dict[str, float]) -> None:
    """``GetNodeDevices``: "device not found" when the core capacity is absent, 0 or unread."""
    with pytest.raises(RegistrationError, match=re.escape(f"device not found {CORES}")):
        capacity_cards("n1", {}, capacity)


def test_the_cards_are_read_from_the_nodes_capacity_through_the_vendor_seam() -> None:
    got = node_cards(MTHREADS, NodeView("n1", {}, {CORES: 32, MEMORY: 192}))
    assert isinstance(got, tuple) and [c.id for c in got] == ["n1-mthreads-0", "n1-mthreads-1"]
    assert node_cards(MTHREADS, NodeView("cpu", {}, {})) == ()
    assert node_cards(MTHREADS, NodeView("n2", {}, {MEMORY: 96})) == f"device not found {CORES}"
    assert MTHREADS.source == f"status.capacity[{CORES}, {MEMORY}]"
    assert {CORES, MEMORY} <= CAPACITY_NAMES


# -- Test_GenerateResourceRequests -----------------------------------------------------------


def _request(nums: int, memreq: int, percentage: int, cores: int) -> CardRequest:
    return CardRequest("Mthreads", nums, memreq, percentage, cores)


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        (
            {COUNT: 1, MEMORY: 1000, CORES: 1},
            {COUNT: 1, MEMORY: 1000, CORES: 1},
            _request(1, 512000, 0, 1),
        ),
        ({}, {MEMORY: 1000, CORES: 1}, None),
        ({}, {COUNT: 1}, _request(1, 0, 100, 0)),
        ({COUNT: 0, MEMORY: 1000, CORES: 1}, {}, None),
        ({COUNT: -1, MEMORY: 1000, CORES: 1}, {}, None),
        ({COUNT: 4294967296, MEMORY: 1000, CORES: 1}, {}, None),
        ({COUNT: 1, MEMORY: 16 * 2**30, CORES: 1}, {}, None),
        ({COUNT: 1, MEMORY: 16.5 * 2**30, CORES: 1}, {}, None),
        ({COUNT: 2, MEMORY: 192, CORES: 32}, {}, _request(2, 49152, 0, 16)),
        ({COUNT: 3, MEMORY: 2, CORES: 5}, {}, _request(3, 341, 0, 1)),
        ({COUNT: 2, CORES: -3}, {}, _request(2, 0, 100, -1)),
        ({COUNT: 1.5}, {}, None),
        ({COUNT: 1, MEMORY: (2**31 - 1) // 512}, {}, _request(1, 4194303 * 512, 0, 0)),
        ({COUNT: 1, MEMORY: (2**31 - 1) // 512 + 1}, {}, None),
        ({COUNT: 1, CORES: 8.5}, {}, _request(1, 0, 100, 0)),
    ],
    ids=[
        "all resources set to limit and request",
        "all resources don't set to limit,count don't set to request",
        "all resources don't set to limit,cores and memory don't set to request",
        "count set to zero with memory and cores",
        "count set to negative with memory and cores",
        "count overflowing int32 with memory and cores",
        "memory overflowing int32 is rejected, not truncated to zero",
        "decimal-form memory request is rejected, not treated as zero",
        "memory and cores are the container's, split over its cards",
        "the split is Go's integer division",
        "a negative split rounds toward zero, as Go's does",
        "a count that is not a whole number asks for nothing (AsInt64)",
        "the largest memory MaxInt32/512 is read",
        "memory above MaxInt32/512 is rejected",
        "cores that are not a whole number are not read",
    ],
)
def test_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], expected: CardRequest | None
) -> None:
    """``Test_GenerateResourceRequests``."""
    assert container_request(limits, requests) == expected


# -- Test_CustomFilterRule -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "allowed"),
    [(["test123"], True), (["test456"], False), ([], True), (["test123", "test456"], False)],
    ids=[
        "allocate device",
        "don't allocate device",
        "no earlier container holds a card",
        "earlier containers hold two cards: no card is every one of them",
    ],
)
def test_custom_filter_rule(held: list[str], allowed: bool) -> None:
    """``Test_CustomFilterRule``: a card is allowed only when it is every card already held."""
    card = Card("test123", 100, 1024, 16, "Mthreads", True)
    grants = [Grant(uuid, "Mthreads", 0, 0) for uuid in held]
    assert custom_filter_rule(grants, card) is allowed


# -- TestDevices_Fit, Test_checkType ---------------------------------------------------------


def held(uuid: str) -> Grant:
    """A card an earlier container of the pod holds."""
    return Grant(uuid, "Mthreads", 0, 0)


FIT_CASES = {
    **hami_fit_cases(
        use_uuid="mthreads.ai/use-gpuuuid",
        nouse_uuid="mthreads.ai/nouse-gpuuuid",
        several_cards=True,
    ),
    "mutex policy rejects used device": FitCase(
        [Gpu("dev-0", 128, (1, 0, 0), count=2)],
        (1, 64, 0, 50),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
        pod=MUTEX,
    ),
    "customFilterRule: only the card an earlier container holds": FitCase(
        [Gpu("dev-0"), Gpu("dev-1")], (1, 512, 0, 20), ["dev-0"], earlier=(held("dev-0"),)
    ),
    "customFilterRule: the held card full, no other card will do": FitCase(
        [Gpu("dev-0", used=(100, 0, 0)), Gpu("dev-1")],
        (1, 512, 0, 20),
        None,
        "1/2 CardNotFoundCustomFilterRule, 1/2 CardTimeSlicingExhausted",
        earlier=(held("dev-0"),),
    ),
    "customFilterRule is checked after the card's other checks": FitCase(
        [Gpu("dev-0"), Gpu("dev-1", 128)],
        (1, 512, 0, 20),
        None,
        "1/2 CardInsufficientMemory, 1/2 CardNotFoundCustomFilterRule",
        earlier=(held("dev-9"),),
    ),
    "no namespace quota is checked by Moore Threads' Fit": FitCase(
        [Gpu("dev-0")], (1, 512, 0, 20), ["dev-0"], quota=Quota(memory=0, cores=0)
    ),
}


def fit(case: FitCase) -> Verdict:
    """``MthreadsDevices.Fit`` of one container: the cards chosen (None: none), the reason."""
    return walk_fit(case, vendor=MTHREADS, word="Mthreads", walk=mthreads_walk)


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_devices_fit(case: FitCase) -> None:
    """``TestDevices_Fit``, then ``customFilterRule`` within ``Fit``."""
    assert fit(case) == (case.chosen, case.reason)


@pytest.mark.parametrize(
    ("word", "fits"),
    [("Mthreads", True), ("test111", False)],
    ids=["the same type", "the different type"],
)
def test_check_type(word: str, fits: bool) -> None:
    """``Test_checkType``: only a request typed ``Mthreads`` is Moore Threads'."""
    got = fit(FitCase([Gpu("dev-0")], (1, 64, 0, 8), None, word=word))
    assert got == ((["dev-0"], "") if fits else (None, "1/1 CardTypeMismatch"))


def test_a_pods_second_container_goes_to_the_first_containers_card() -> None:
    """``fitInDevices`` then ``Fit`` per container with ``allocated``: the second container's
    walk (spread: the used card sorts first, so the free one is met first) passes the free
    card by ``customFilterRule`` and takes the first container's."""
    cards = capacity_cards("n1", {}, {CORES: 32, MEMORY: 192})
    uses = [CardUse(), CardUse()]
    request = container_request({COUNT: 1, MEMORY: 8, CORES: 4}, {})
    assert request is not None
    opts = MTHREADS.read_options({}, "spread", frozenset())
    first, _, _ = mthreads_walk(cards, uses, request, opts, "Mthreads")
    assert first == [Grant("n1-mthreads-1", "Mthreads", 4096, 4)]
    uses[1] = CardUse(1, 4096, 4)
    second, reasons, _ = mthreads_walk(
        cards, uses, request, opts, "Mthreads", Given(earlier=tuple(first))
    )
    assert second == first and reasons == {"CardNotFoundCustomFilterRule": 1}


def test_fit_node_keeps_a_pods_containers_on_one_card() -> None:
    """``customFilterRule`` through the seam: ``fit_node`` gives each app container the cards
    the earlier ones were given (``Given.earlier``), so the second follows the first."""
    cards = capacity_cards("n1", {}, {CORES: 32, MEMORY: 192})
    request = container_request({COUNT: 1, MEMORY: 8, CORES: 4}, {})
    assert request is not None
    opts = MTHREADS.read_options({}, "spread", frozenset())
    two = [(False, request), (False, request)]
    got = fit_node(cards, [CardUse(), CardUse()], two, opts, "Mthreads", MTHREADS.walk)
    assert got.grants is not None
    assert [g.uuid for c in got.grants for g in c] == ["n1-mthreads-1", "n1-mthreads-1"]


def test_cores_are_out_of_sixteen_per_card() -> None:
    """A card's ``Devcore`` is 16: asking more is ``CardInsufficientCore`` (through the vendor's
    walk in ``fit_node``), and no cores asked of a card whose 16 are used is exhausted."""
    cards = capacity_cards("n1", {}, {CORES: 16, MEMORY: 96})
    opts = MTHREADS.read_options({}, "spread", frozenset())
    too_many = CardRequest("Mthreads", 1, 1024, 0, 17)
    got = fit_node(cards, [CardUse()], [(False, too_many)], opts, "Mthreads", MTHREADS.walk)
    assert (got.grants, got.reason) == (None, "1/1 CardInsufficientCore")
    no_cores = CardRequest("Mthreads", 1, 1024, 0, 0)
    full = [CardUse(1, 1024, 16)]
    got = fit_node(cards, full, [(False, no_cores)], opts, "Mthreads", MTHREADS.walk)
    assert (got.grants, got.reason) == (None, "1/1 CardComputeUnitsExhausted")


def test_a_whole_gpu_request_fits_through_fit_node() -> None:
    """What HAMi's webhook leaves of ``mthreads.com/vgpu: 2``: 32 cores and 192 memory units,
    one card's worth (16 cores, 96 units) on each of two cards."""
    cards = capacity_cards("n1", {}, {CORES: 32, MEMORY: 192})
    request = container_request({COUNT: 2, MEMORY: 192, CORES: 32}, {})
    assert request is not None
    opts = MTHREADS.read_options({}, "spread", frozenset())
    got = fit_node(
        cards, [CardUse(), CardUse()], [(False, request)], opts, "Mthreads", MTHREADS.walk
    )
    assert got.grants == [
        [
            Grant("n1-mthreads-1", "Mthreads", 49152, 16),
            Grant("n1-mthreads-0", "Mthreads", 49152, 16),
        ]
    ]


# -- TestDevices_AddResourceUsage ------------------------------------------------------------


def test_add_resource_usage() -> None:
    """``TestDevices_AddResourceUsage``: a share adds one slot, its cores and its memory."""
    before = CardUse(0, 2000, 15)
    share = pod_usage(0, [[Grant("dev-0", "Mthreads", 1024, 50)]])["dev-0"]
    after = (before.used + share.used, before.usedcores + share.usedcores)
    assert (*after, before.usedmem + share.usedmem) == (1, 65, 3024)


# -- Test_PatchAnnotations -------------------------------------------------------------------


def test_patch_annotations() -> None:
    """``Test_PatchAnnotations`` "exist device": the allocation on the allocated key alone, the
    card index, and the node (none in the Go test's input: "")."""
    containers = [[Grant("test1", "Mthreads", 1000, 1)]]
    got = mthreads_annotations(BindPod({}), containers, 1.5)
    assert got == {
        "mthreads.com/gpu-index": "0",
        "mthreads.com/predicate-time": "1500000000",
        "mthreads.com/predicate-node": "",
    }
    bound = MTHREADS.bind_annotations("n1", containers, 1_800_000_000.0)
    assert bound[ALLOCATED] == "test1,Mthreads,1000,1:;"
    assert "hami.io/mthreads-vgpu-devices-to-allocate" not in bound
    assert set(bound) == {
        ALLOCATED,
        "hami.io/vgpu-node",
        "hami.io/vgpu-time",
        "hami.io/bind-phase",
        "hami.io/bind-time",
        "mthreads.com/gpu-index",
        "mthreads.com/predicate-time",
        "mthreads.com/predicate-node",
    }
    assert set(bound) == set(MTHREADS.written)
    assert bound["mthreads.com/predicate-time"] == "1800000000000000000"


@pytest.mark.parametrize(
    ("containers", "index"),
    [
        ([[Grant("n1-mthreads-2", "Mthreads", 0, 0)]], "2"),
        (
            [[Grant("n1-mthreads-3", "Mthreads", 0, 0), Grant("n1-mthreads-1", "Mthreads", 0, 0)]],
            "3,1",
        ),
        (
            [
                [Grant("n1-mthreads-0", "Mthreads", 0, 0)],
                [],
                [Grant("n1-mthreads-1", "Mthreads", 0, 0)],
            ],
            "1",
        ),
    ],
    ids=[
        "the card's index",
        "one container's cards, in its order",
        "the last container holding cards stays",
    ],
)
def test_the_gpu_index_is_the_last_containers_cards(
    containers: list[list[Grant]], index: str
) -> None:
    """``PatchAnnotations``: ``gpu-index`` is written for each container holding cards in turn."""
    assert mthreads_annotations(BindPod({}), containers, 0.0)["mthreads.com/gpu-index"] == index


def test_the_predicate_node_is_the_node_chosen() -> None:
    """``PatchAnnotations``: ``predicate-node`` copies ``hami.io/vgpu-node``."""
    got = mthreads_annotations(BindPod({}, "n1"), [[Grant("n1-mthreads-0", "Mthreads", 0, 0)]], 0.0)
    assert got["mthreads.com/predicate-node"] == "n1"


def test_patch_annotations_with_no_card_add_nothing_of_moore_threads() -> None:
    assert mthreads_annotations(BindPod({}), [[]], 0.0) == {}


# -- the vendor ------------------------------------------------------------------------------


def test_the_vendor_is_hamis_moore_threads_dialect() -> None:
    """``InitMthreadsDevice`` with the chart's ``mthreads`` names; no node lock (``LockNode``)."""
    assert MTHREADS.name == "Mthreads"
    assert MTHREADS.resources == {COUNT, MEMORY, CORES}
    assert (MTHREADS.count_resource, MTHREADS.quota_memory, MTHREADS.quota_cores) == (
        COUNT,
        MEMORY,
        CORES,
    )
    assert MTHREADS.keys.lock == ""
    assert (MTHREADS.family, MTHREADS.memory_factor) == ("mthreads", 512)
    assert MTHREADS.cordon_annotation == "" and MTHREADS.register_annotation == ""
    assert MTHREADS in VENDORS and "mthreads" in FAMILIES
