"""Kunlunxin XPUs and vXPUs the HAMi way: tables after HAMi's ``pkg/device/kunlun``
``topo_test.go``, ``device_test.go`` and ``vdevice_test.go``.

Each test names the Go test or function it follows; rows are named by the Go case (a repeated
Go name carries Go's ``#01`` suffix).
"""

from __future__ import annotations

import json

import pytest

from caldera.devices.fit import NO_GIVEN, CardUse, fit_node
from caldera.devices.kunlun import (
    DEVICE_SELECTION,
    GROUP,
    INTER_GROUP,
    KUNLUN_XPU,
    QUADS,
    bubble_score,
    capacity_cards,
    container_request,
    count_bubbles,
    device_pick,
    graph_select,
    interconnect,
    pod_options,
)
from caldera.devices.kunlun_vxpu import (
    KUNLUN_VXPU,
    REGISTER_ANNOTATION,
    fit_vxpu,
    registered_cards,
    trim_memory,
)
from caldera.devices.kunlun_vxpu import container_request as vxpu_request
from caldera.devices.model import Card, CardRequest, Grant, NodeView, RegistrationError
from caldera.devices.vendor import ScoreInput
from caldera.devices.vendors import node_cards

XPU, VXPU, VMEM = "kunlunxin.com/xpu", "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"
FULL = 98304


def xpus(*used: int) -> tuple[list[Card], list[CardUse]]:
    """``newDevices``: eight XPUs, indexes 0-7, ``used`` taken."""
    cards = capacity_cards("n1", {}, {XPU: 8})
    return cards, [CardUse(used=1 if c.index in used else 0) for c in cards]


def free(*used: int) -> tuple[list[Card], list[bool]]:
    """The XPUs and whether each fits (``FitXPU``: unused and healthy)."""
    cards, uses = xpus(*used)
    return cards, [u.used == 0 for u in uses]


def select(count: int, *used: int) -> list[int]:
    return graph_select(*free(*used), count)


def only_free(*keep: int) -> tuple[int, ...]:
    """``onlyFree``: every XPU but ``keep`` used."""
    return tuple(i for i in range(8) if i not in keep)


def vxpus(count: int = 4, devmem: int = FULL) -> list[Card]:
    """The vXPU cards of HAMi's tests: ``xpu-<i>`` of type ``XPU``."""
    return [Card(f"xpu-{i}", count, devmem, 100, "XPU", True, i) for i in range(8)]


# -- topo_test.go -------------------------------------------------------------------------------


def test_the_links_are_hamis_strings() -> None:
    """``TestParseInterconnection_Structure`` and ``TestParseInterconnection2_Structure``:
    ``InterGroupConnection``, ``GroupConnection`` and ``InterGroupConnection2``."""
    assert INTER_GROUP == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert ",".join(f"{a}-{b}" for a, b in GROUP) == (
        "0-1,0-2,0-3,1-2,1-3,2-3,4-5,4-6,4-7,5-6,5-7,6-7"
    )
    assert ",".join("-".join(map(str, q)) for q in QUADS) == (
        "0-1-4-5,2-3-6-7,0-2-4-6,1-3-5-7,0-3-4-7,1-2-5-6"
    )


@pytest.mark.parametrize(
    ("indexes", "want"),
    [(set(), 1), ({0, 1, 2, 3}, 1), ({0}, 3), ({4}, 3), ({0, 1}, 2)],
    ids=[
        "empty",
        "all left, full group of 4",
        "single left device",
        "single right device",
        "two left devices",
    ],
)
def test_count_bubbles(indexes: set[int], want: int) -> None:
    """``TestCountbubble``."""
    assert count_bubbles(indexes) == want


@pytest.mark.parametrize(
    ("start", "count", "want"),
    [(0, 2, [0, 2]), (4, 3, [4, 5, 6]), (6, 5, [6, 7])],
    ids=["start=0, count=2", "start=4, count=3", "start=6, count=5: what is left"],
)
def test_device_pick(start: int, count: int, want: list[int]) -> None:
    """``TestDevicepick``: XPUs 1 and 3 used."""
    assert device_pick(*free(1, 3), start, count) == want


@pytest.mark.parametrize(
    ("count", "used", "want"),
    [
        (8, (), [0, 1, 2, 3, 4, 5, 6, 7]),
        (8, (0,), []),
        (1, (), [0]),
        (4, (4, 5, 6, 7), [0, 1, 2, 3]),
        (2, only_free(0, 4), [0, 4]),
        (4, only_free(0, 1, 4, 5), [0, 1, 4, 5]),
        (3, (), []),
        (1, (0, 1, 2), [3]),
        (2, (0, 1), [2, 3]),
    ],
    ids=[
        "TestGraghSelect_AllEightAvailable",
        "TestGraghSelect_EightNotFullyAvailable",
        "TestGraghSelect_SingleDevice",
        "TestGraghSelect_FourFromLeftWing",
        "TestInterconnect_TwoDevices",
        "TestInterconnect_FourDevices",
        "TestInterconnect_UnsupportedCount",
        "one XPU: the wing with one left is the tightest (oddorder 1 first)",
        "two XPUs: the wing with exactly two left",
    ],
)
def test_graph_select(count: int, used: tuple[int, ...], want: list[int]) -> None:
    """``topo_test.go``'s ``TestGraghSelect_*`` and ``TestInterconnect_*`` through
    ``graghSelect`` (the two last rows: ``oddorder`` and the tightest wing)."""
    assert select(count, *used) == want


def test_interconnect_chooses_a_linked_pair_among_many() -> None:
    """``TestInterconnect_TwoDevices_ChoosesAmongMultipleCandidates``: all eight free, the first
    linked pair across the wings in the walk's order."""
    assert interconnect(*free(), 2) == [0, 4]
    assert interconnect(*free(), 3) == []


@pytest.mark.parametrize(
    ("prev", "cur", "want"),
    [([0], [0, 1], 3000.0), ([0], [4], 2000.0), ([0, 1], [0], 1000.0), ([0, 1, 2, 3], [0], 0.0)],
    ids=[
        "cur decreases fragmentation by 1",
        "cur unchanged",
        "cur increases fragmentation by 1",
        "cur increases fragmentation by 2",
    ],
)
def test_calcscore(prev: list[int], cur: list[int], want: float) -> None:
    """``TestCalcscore`` through ``ScoreNode``: the XPUs in use before against the pod's."""
    cards, _ = xpus()
    before = [(c, CardUse(used=1 if c.index in prev else 0)) for c in cards]
    assert bubble_score(before, [c for c in cards if c.index in cur]) == want


# -- device_test.go: the whole XPU ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "used", "want"),
    [
        (8, (), [0, 1, 2, 3, 4, 5, 6, 7]),
        (8, (5,), []),
        (2, (5,), [4, 6]),
        (1, (5,), [4]),
        (1, (6, 7), [4]),
        (2, only_free(3, 7), [3, 7]),
        (4, (2, 3, 7), [0, 1, 4, 5]),
        (4, (3, 6), [0, 1, 4, 5]),
        (4, (2, 6), [0, 1, 4, 5]),
    ],
    ids=[
        "full allocate",
        "full allocate not success",
        "allocate 2 cards",
        "allocate 1 card",
        "allocate 1 card#01",
        "allocate 2 card according to interconnect",
        "allocate 4 cards according to interconnect when have 5 cards",
        "allocate 4 cards according to interconnect when have 6 cards, leave 2 cards unconnected",
        "allocate 4 cards according to interconnect when have 6 cards, leave 2 cards connected",
    ],
)
def test_graph_select_for_whole_xpus(count: int, used: tuple[int, ...], want: list[int]) -> None:
    """``Test_graphSelect``: ``graghSelect`` with ``FitXPU``."""
    assert select(count, *used) == want


@pytest.mark.parametrize(
    ("nums", "usage", "want"),
    [
        (8, [(0, 0)] * 8, [0, 1, 2, 3, 4, 5, 6, 7]),
        (4, [(0, 0), (1, 1), (0, 0), (2, 2), (0, 0), (1, 2), (0, 0), (0, 0)], [0, 1, 2, 3]),
        (4, [(0, 0), (2, 2), (0, 0), (1, 2), (0, 0), (1, 1), (0, 0), (0, 0)], [4, 5, 6, 7]),
        (2, [(1, 2)] * 8, []),
        (1, [(1, 1), (1, 1), (1, 2), (0, 0), (0, 0), (1, 1), (0, 0), (0, 0)], [0]),
        (2, [(0, 0), (2, 2), (1, 1), (1, 2), (0, 0), (0, 0), (1, 1), (0, 0)], [0, 1]),
    ],
    ids=[
        "full allocate with unused devices",
        "allocate with matching memory requirements",
        "allocate with mixed memory requirements",
        "no suitable devices due to memory mismatch",
        "allocate 1 card with matching memory",
        "allocate 2 cards with different memory requirements",
    ],
)
def test_graph_select_for_vxpus(nums: int, usage: list[tuple[int, int]], want: list[int]) -> None:
    """``Test_graphSelectVXPU``: ``graghSelect`` with ``FitVXPU`` for 24576 MiB; ``usage`` is
    (used, usedmem in quarters of an XPU) per XPU."""
    cards = vxpus()
    uses = [CardUse(used, quarters * 24576) for used, quarters in usage]
    fitting = [fit_vxpu(c, u, 24576) for c, u in zip(cards, uses, strict=True)]
    assert graph_select(cards, fitting, nums) == want


@pytest.mark.parametrize(
    ("prev", "taken", "want"),
    [((0, 1, 2, 3), tuple(range(8)), 3000.0), ((), (0,), 0.0)],
    ids=["Scenario 1", "Scenario 2"],
)
def test_score_node(prev: tuple[int, ...], taken: tuple[int, ...], want: float) -> None:
    """``Test_ScoreNode``: through the vendor's ``score_node``, under any policy."""
    cards, before = xpus(*prev)
    grants = [[Grant(c.id, "kunlun", FULL, 100) for c in cards if c.index in taken]]
    assert KUNLUN_XPU.score_node is not None
    for policy in ("binpack", "spread"):
        seen = ScoreInput({}, cards, before, grants, pod_options({}, policy), policy)
        assert KUNLUN_XPU.score_node(seen) == want


def test_a_node_with_a_card_not_kunlun_scores_0() -> None:
    """``ScoreNode``: a previous device whose type is not ``kunlun`` makes the score 0."""
    cards, before = xpus()
    cards[7] = Card("n1-other-7", 100, FULL, 100, "other", True, 7)
    grants = [[Grant(cards[0].id, "kunlun", FULL, 100)]]
    assert KUNLUN_XPU.score_node is not None
    assert (
        KUNLUN_XPU.score_node(ScoreInput({}, cards, before, grants, pod_options({}, ""), "")) == 0
    )


def test_get_node_devices_lists_xpus_from_capacity_the_second_half_on_numa_1() -> None:
    """``KunlunDevices.GetNodeDevices``: ``<node>-kunlun-<i>``, 100 slots, 98304 MiB, 100 %;
    no count is "device not found"."""
    got = node_cards(KUNLUN_XPU, NodeView("n1", {}, {XPU: 4}))
    assert not isinstance(got, str)
    assert [(c.id, c.index, c.numa) for c in got] == [
        ("n1-kunlun-0", 0, 0),
        ("n1-kunlun-1", 1, 0),
        ("n1-kunlun-2", 2, 1),
        ("n1-kunlun-3", 3, 1),
    ]
    assert {(c.count, c.devmem, c.devcore, c.type) for c in got} == {(100, FULL, 100, "kunlun")}
    with pytest.raises(RegistrationError, match=r"device not found kunlunxin\.com/xpu"):
        capacity_cards("n1", {}, {XPU: 0})
    assert node_cards(KUNLUN_XPU, NodeView("n1", {}, {})) == ()


@pytest.mark.parametrize(
    ("limits", "want"),
    [({}, None), ({XPU: 2}, CardRequest("kunlun", 2, 0, 100, 0)), ({XPU: 1.5}, None)],
    ids=["no xpu", "two whole XPUs", "a fraction asks for nothing"],
)
def test_generate_resource_requests(limits: dict[str, float], want: CardRequest | None) -> None:
    """``KunlunDevices.GenerateResourceRequests``: memory 0, 100 % of it, 0 cores."""
    assert container_request(limits, {}) == want


def fit_xpus(annotations: dict[str, str], used: tuple[int, ...] = (), nums: int = 1) -> object:
    """``KunlunDevices.Fit`` on ``xpus(*used)`` through ``fit_node``: the XPU ids, or the
    reason."""
    cards, uses = xpus(*used)
    request = container_request({XPU: nums}, {})
    opts = pod_options(annotations, "spread")
    got = fit_node(cards, uses, [(False, request)], opts, "kunlun", KUNLUN_XPU.walk)
    return got.reason if got.grants is None else [g.uuid for g in got.grants[0]]


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        ({"baidu.com/use-gpuuuid": "n1-kunlun-5"}, ["n1-kunlun-5"]),
        ({"hami.io/use-xpu-uuid": "n1-kunlun-3"}, ["n1-kunlun-3"]),
        ({"hami.io/use-xpu-uuid": " n1-kunlun-2 , n1-kunlun-6"}, ["n1-kunlun-2"]),
        ({"hami.io/use-xpu-uuid": "n1-kunlun-99"}, "8/8 CardUuidMismatch"),
        ({"baidu.com/nouse-gpuuuid": ",".join(f"n1-kunlun-{i}" for i in range(8))}, "8/8 "),
        ({"hami.io/no-use-xpu-uuid": ",".join(f"n1-kunlun-{i}" for i in range(8))}, "8/8 "),
        (
            {"hami.io/use-xpu-uuid": "n1-kunlun-0", "baidu.com/use-gpuuuid": "n1-kunlun-1"},
            "8/8 CardUuidMismatch",
        ),
    ],
    ids=[
        "TestKunlunDevices_Fit_UseUUID: legacy annotation",
        "TestKunlunDevices_Fit_UseUUID: new standard annotation",
        "TestKunlunDevices_Fit_UseUUID: the literal key (a list, spaces trimmed)",
        "TestKunlunDevices_Fit_UseUUID: a card not on the node",
        "TestKunlunDevices_Fit_NoUseUUID: legacy annotation",
        "TestKunlunDevices_Fit_NoUseUUID: new standard annotation",
        "the two pairs of selectors allow no XPU in common",
    ],
)
def test_the_uuid_selectors_pick_or_refuse_xpus(annotations: dict[str, str], want: object) -> None:
    """``TestKunlunDevices_Fit_UseUUID`` and ``_NoUseUUID``: both pairs of selectors, each
    refused XPU counted ``CardUuidMismatch``."""
    got = fit_xpus(annotations)
    if isinstance(want, str) and want.endswith(" "):
        want += "CardUuidMismatch"
    assert got == want


def test_no_way_to_take_the_xpus_is_one_numa_not_fit() -> None:
    """``TestKunlunDevices_Fit_NumaNotFit`` (every XPU used) and ``Fit`` for three XPUs."""
    assert fit_xpus({}, tuple(range(8))) == "1/8 NumaNotFit"
    assert fit_xpus({}, (), 3) == "1/8 NumaNotFit"
    assert fit_xpus({}, (0, 1, 2, 3, 4), 4) == "1/8 NumaNotFit"


def test_a_pod_of_four_xpus_takes_a_whole_wing_and_writes_their_indexes() -> None:
    """``Fit`` then ``PatchAnnotations``: ``BAIDU_COM_DEVICE_IDX`` and ``kunlun-allocated``
    (each XPU's whole memory and cores), no node lock."""
    cards, uses = xpus()
    request = container_request({XPU: 4}, {})
    opts = pod_options({}, "spread")
    got = fit_node(cards, uses, [(False, request)], opts, "kunlun", KUNLUN_XPU.walk)
    assert got.grants is not None
    notes = KUNLUN_XPU.bind_annotations("n1", got.grants, 0.0)
    assert notes[DEVICE_SELECTION] == "0,1,2,3"
    assert notes["hami.io/kunlun-allocated"] == (
        "".join(f"n1-kunlun-{i},kunlun,98304,100:" for i in range(4)) + ";"
    )
    assert KUNLUN_XPU.keys.lock == ""


def test_the_device_selection_is_the_last_container_holding_xpus() -> None:
    """``PatchAnnotations``: ``BAIDU_COM_DEVICE_IDX`` is written per container, the last wins."""
    first = [Grant("n1-kunlun-0", "kunlun", FULL, 100), Grant("n1-kunlun-1", "kunlun", FULL, 100)]
    last = [Grant("n1-kunlun-6", "kunlun", FULL, 100)]
    notes = KUNLUN_XPU.bind_annotations("n1", [first, last, []], 0.0)
    assert notes[DEVICE_SELECTION] == "6"


def test_wings_are_counted_by_position_in_hamis_card_order() -> None:
    """``fitInDevices`` sorts the cards before ``Fit``, and ``graghSelect`` counts its wings by
    position in that order: under spread a used XPU sorts first, so four XPUs asked beside a
    used one come from positions 4-7 (XPUs 3, 4, 6, 7), as HAMi takes them."""
    assert fit_xpus({}, (5,), 4) == [f"n1-kunlun-{i}" for i in (3, 4, 6, 7)]


# -- vdevice_test.go and device_test.go: the vXPU -----------------------------------------------


@pytest.mark.parametrize(
    ("memory", "want"),
    [(0, 24576), (24576, 24576), (24577, 49152), (49152, 49152), (49153, FULL), (200000, FULL)],
    ids=[
        "zero",
        "at first threshold",
        "just above first threshold",
        "at second threshold",
        "just above second threshold",
        "far above",
    ],
)
def test_trim_memory(memory: int, want: int) -> None:
    """``Test_trimMemory``."""
    assert trim_memory(memory) == want


@pytest.mark.parametrize(
    ("limits", "requests", "want"),
    [
        ({}, {}, None),
        ({VXPU: 1}, {}, CardRequest("XPU", 1, FULL, 100, 100)),
        ({}, {VXPU: 2, VMEM: 24576}, CardRequest("XPU", 2, 24576, 0, 25)),
        ({VXPU: 1, VMEM: 40000}, {}, CardRequest("XPU", 1, 49152, 0, 50)),
        ({VXPU: 1, VMEM: 0}, {}, CardRequest("XPU", 1, 24576, 0, 25)),
    ],
    ids=[
        "no vcount requested",
        "vcount without memory defaults to full device",
        "vcount with memory from requests fallback",
        "memory rounded up to a partition",
        "memory 0 is the smallest partition",
    ],
)
def test_vxpu_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], want: CardRequest | None
) -> None:
    """``Test_KunlunVDevices_GenerateResourceRequests``; the two last rows follow
    ``GenerateResourceRequests`` and ``trimMemory``."""
    assert vxpu_request(limits, requests) == want


def test_get_node_devices_reads_the_vxpu_registration() -> None:
    """``Test_GetNodeDevices``: valid devices; invalid JSON and an empty list are refused; no
    annotation is no card."""
    card = {"id": "xpu-0", "index": 0, "count": 1, "devmem": FULL, "devcore": 100}
    card |= {"type": "XPU", "health": True}
    got = node_cards(KUNLUN_VXPU, NodeView("n1", {REGISTER_ANNOTATION: json.dumps([card])}))
    assert got == (Card("xpu-0", 1, FULL, 100, "XPU", True, 0, mode=""),)
    invalid = node_cards(KUNLUN_VXPU, NodeView("n1", {REGISTER_ANNOTATION: "not-json"}))
    assert isinstance(invalid, str)
    with pytest.raises(RegistrationError, match="no device found on node"):
        registered_cards("[]")
    assert node_cards(KUNLUN_VXPU, NodeView("n1", {})) == ()


def test_a_vxpu_card_whose_type_does_not_name_xpu_is_not_offered() -> None:
    """``GetNodeDevices`` keeps the registered type, and ``getNodeResources`` looks for the
    request's type ``XPU`` in each card's type."""
    card = {"id": "xpu-0", "count": 4, "devmem": FULL, "devcore": 100, "type": "P800"}
    cards = registered_cards(json.dumps([card | {"health": True}]))
    assert [c.type for c in cards] == ["P800"]
    request = vxpu_request({VXPU: 1}, {})
    opts = pod_options({}, "")
    got = fit_node(cards, [CardUse()], [(False, request)], opts, "XPU", KUNLUN_VXPU.walk)
    assert (got.grants, got.reason) == (None, "1/0 NodeInsufficientDevice")


@pytest.mark.parametrize(
    ("health", "use", "memreq", "fits"),
    [
        (False, CardUse(0, 90000), 20000, False),
        (True, CardUse(), 24576, True),
        (True, CardUse(2, 49152), 24576, True),
        (False, CardUse(1, 49152), 24576, False),
        (False, CardUse(), 24576, False),
        (True, CardUse(1, 49152), 24576, False),
        (True, CardUse(0, 90000), 20000, False),
        (True, CardUse(3, 73728, 75), 49152, False),
    ],
    ids=[
        "would exceed total memory",
        "idle device always fits",
        "shared device with matching average memory",
        "shared device with mismatched average memory",
        "unhealthy device is rejected",
        "a healthy shared device with mismatched average memory",
        "a healthy device without the memory",
        "no memory left",
    ],
)
def test_fit_vxpu(health: bool, use: CardUse, memreq: int, fits: bool) -> None:
    """``Test_FitVXPU_direct`` (the three last rows: ``FitVXPU`` on a healthy XPU)."""
    card = Card("xpu-0", 4, FULL, 100, "XPU", health)
    assert fit_vxpu(card, use, memreq) is fits


def fit_vxpus(
    cards: list[Card], uses: list[CardUse], request: CardRequest | None, annotations: dict[str, str]
) -> object:
    """``KunlunVDevices.Fit`` through ``fit_node``: the XPU ids, or the reason."""
    opts = pod_options(annotations, "spread")
    got = fit_node(cards, uses, [(False, request)], opts, "XPU", KUNLUN_VXPU.walk)
    return got.reason if got.grants is None else [g.uuid for g in got.grants[0]]


def test_mutex_refuses_the_used_xpus_sharing_would_take() -> None:
    """``TestKunlunVDevices_Fit_Mutex``: eight XPUs each holding one 24576 MiB vXPU; the default
    policy shares one, ``mutex`` counts each ``ExclusiveDeviceAllocateConflict``."""
    used = [CardUse(1, 24576, 25) for _ in range(8)]
    request = CardRequest("XPU", 1, 24576, 0, 0)
    assert fit_vxpus(vxpus(), used, request, {}) != []
    mutex = {"hami.io/gpu-scheduler-policy": "mutex"}
    assert fit_vxpus(vxpus(), used, request, mutex) == "8/8 ExclusiveDeviceAllocateConflict"


def test_vxpus_share_an_xpu_by_partitions_of_one_size() -> None:
    """``KunlunVDevices.Fit``: a used XPU takes a vXPU of its partition size, with the request's
    memory and cores in the grant."""
    cards = [Card(f"xpu-{i}", 4, FULL, 100, "XPU", True, i) for i in range(2)]
    used = [CardUse(1, 24576, 25), CardUse(1, 24576, 25)]
    request = vxpu_request({VXPU: 1, VMEM: 24576}, {})
    assert request is not None and KUNLUN_VXPU.walk is not None
    opts = pod_options({}, "spread")
    grants, _, _ = KUNLUN_VXPU.walk(cards, used, request, opts, "XPU", NO_GIVEN)
    assert grants == [Grant("xpu-0", "XPU", 24576, 25)]


def test_a_vxpu_too_big_for_every_xpu_is_one_numa_not_fit() -> None:
    """``TestKunlunVDevices_Fit_NumaNotFit``: 2048 MiB asked of XPUs of 1024."""
    request = CardRequest("XPU", 1, 2048, 0, 0)
    assert fit_vxpus(vxpus(devmem=1024), [CardUse()] * 8, request, {}) == "1/8 NumaNotFit"


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        ({"hami.io/use-xpu-uuid": "xpu-3"}, ["xpu-3"]),
        ({"baidu.com/use-gpuuuid": "xpu-2"}, ["xpu-2"]),
        ({"hami.io/no-use-xpu-uuid": ",".join(f"xpu-{i}" for i in range(8))}, "8/8 "),
        ({"baidu.com/nouse-gpuuuid": ",".join(f"xpu-{i}" for i in range(8))}, "8/8 "),
    ],
    ids=[
        "standard hami annotation",
        "legacy baidu annotation",
        "standard hami nouse annotation",
        "legacy baidu nouse annotation",
    ],
)
def test_vxpu_uuid_selectors(annotations: dict[str, str], want: object) -> None:
    """``TestKunlunVDevices_Fit_UUIDAnnotations``: a whole XPU's memory asked of XPUs of 10
    slots."""
    request = CardRequest("XPU", 1, FULL, 0, 0)
    if isinstance(want, str):
        want += "CardUuidMismatch"
    assert fit_vxpus(vxpus(10), [CardUse()] * 8, request, annotations) == want


def test_vxpu_bind_annotations_lock_and_names() -> None:
    """``Test_KunlunVDevices_PatchAnnotations``, ``LockNode``'s key, ``ScoreNode`` (0: none)
    and ``GetResourceNames``."""
    grant = Grant("xpu-0", "XPU", 24576, 100)
    notes = KUNLUN_VXPU.bind_annotations("n1", [[grant]], 0.0)
    assert notes["hami.io/xpu-devices-to-allocate"] == "xpu-0,XPU,24576,100:;"
    assert notes["hami.io/xpu-devices-allocated"] == "xpu-0,XPU,24576,100:;"
    assert KUNLUN_VXPU.keys.lock == "hami.io/mutex.lock"
    assert KUNLUN_VXPU.score_node is None
    assert (KUNLUN_VXPU.count_resource, KUNLUN_VXPU.quota_memory, KUNLUN_VXPU.quota_cores) == (
        VXPU,
        VMEM,
        "",
    )
    assert (KUNLUN_XPU.family, KUNLUN_VXPU.family) == ("kunlun", "kunlun")
