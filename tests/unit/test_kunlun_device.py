"""Kunlunxin XPUs and vXPUs the HAMi way: tables after HAMi's ``pkg/device/kunlun``
``topo_test.go``, ``device_test.go`` and ``vdevice_test.go``.

Each test names the Go test or function it follows; rows are named by the Go case.
"""

from __future__ import annotations

import json

import pytest

from caldera.devices.fit import NO_GIVEN, CardUse, fit_node
from caldera.devices.kunlun import (
    DEVICE_SELECTION,
    KUNLUN_XPU,
    bubble_score,
    capacity_cards,
    container_request,
    graph_select,
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
from caldera.devices.vendors import node_cards

XPU, VXPU, VMEM = "kunlunxin.com/xpu", "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory"


def xpus(*used: int) -> tuple[list[Card], list[CardUse]]:
    """``newDevices``: eight XPUs, indexes 0-7, ``used`` taken."""
    cards = capacity_cards("n1", {}, {XPU: 8})
    return cards, [CardUse(used=1 if c.index in used else 0) for c in cards]


def select(count: int, *used: int) -> list[int]:
    cards, uses = xpus(*used)
    return graph_select(cards, [u.used == 0 for u in uses], count)


def only_free(*keep: int) -> tuple[int, ...]:
    """``onlyFree``: every XPU but ``keep`` used."""
    return tuple(i for i in range(8) if i not in keep)


@pytest.mark.parametrize(
    ("count", "used", "want"),
    [
        (8, (), [0, 1, 2, 3, 4, 5, 6, 7]),
        (8, (0,), []),
        (1, (), [0]),
        (4, (4, 5, 6, 7), [0, 1, 2, 3]),
        (2, only_free(1, 5), [1, 5]),
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
    """``graghSelect`` and ``interconnect``."""
    assert select(count, *used) == want


@pytest.mark.parametrize(
    ("prev", "cur", "want"),
    [
        ([0], [0, 1], 3000.0),
        ([0], [4], 2000.0),
        ([0, 1], [0], 1000.0),
        ([0, 1, 2, 3], [0], 0.0),
    ],
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


def test_get_node_devices_lists_xpus_from_capacity_the_second_half_on_numa_1() -> None:
    """``GetNodeDevices``: ``<node>-kunlun-<i>``, 100 slots, 98304 MiB, 100 %."""
    got = node_cards(KUNLUN_XPU, NodeView("n1", {}, {XPU: 4}))
    assert not isinstance(got, str)
    assert [(c.id, c.index, c.numa) for c in got] == [
        ("n1-kunlun-0", 0, 0),
        ("n1-kunlun-1", 1, 0),
        ("n1-kunlun-2", 2, 1),
        ("n1-kunlun-3", 3, 1),
    ]
    assert {(c.count, c.devmem, c.devcore, c.type) for c in got} == {(100, 98304, 100, "kunlun")}
    with pytest.raises(RegistrationError, match=r"device not found kunlunxin\.com/xpu"):
        capacity_cards("n1", {}, {XPU: 0})


@pytest.mark.parametrize(
    ("limits", "want"),
    [({}, None), ({XPU: 2}, CardRequest("kunlun", 2, 0, 100, 0)), ({XPU: 1.5}, None)],
    ids=["no xpu", "two whole XPUs", "a fraction asks for nothing"],
)
def test_generate_resource_requests(limits: dict[str, float], want: CardRequest | None) -> None:
    """``KunlunDevices.GenerateResourceRequests``."""
    assert container_request(limits, {}) == want


def test_a_pod_of_four_xpus_takes_a_whole_wing_and_writes_their_indexes() -> None:
    """``Fit`` then ``PatchAnnotations``: ``BAIDU_COM_DEVICE_IDX`` and ``kunlun-allocated``."""
    cards, uses = xpus()
    request = container_request({XPU: 4}, {})
    opts = pod_options({}, "spread", frozenset())
    got = fit_node(cards, uses, [(False, request)], opts, "kunlun", KUNLUN_XPU.walk)
    assert got.grants is not None
    assert [g.uuid for g in got.grants[0]] == [f"n1-kunlun-{i}" for i in range(4)]
    notes = KUNLUN_XPU.bind_annotations("n1", got.grants, 0.0)
    assert notes[DEVICE_SELECTION] == "0,1,2,3"
    assert notes["hami.io/kunlun-allocated"].startswith("n1-kunlun-0,kunlun,98304,100:")


@pytest.mark.parametrize(
    ("annotations", "used", "reason"),
    [
        ({}, (0, 1, 2, 3, 4), "1/8 NumaNotFit"),
        ({"hami.io/use-xpu-uuid": "n1-kunlun-9"}, (), "8/8 CardUuidMismatch"),
        (
            {"hami.io/use-xpu-uuid": "n1-kunlun-0", "baidu.com/use-gpuuuid": "n1-kunlun-1"},
            (),
            "8/8 CardUuidMismatch",
        ),
    ],
    ids=[
        "four XPUs with three free",
        "a UUID no XPU has",
        "the two pairs of selectors allow no XPU in common",
    ],
)
def test_a_refused_node_says_why_once(
    annotations: dict[str, str], used: tuple[int, ...], reason: str
) -> None:
    """``Fit``: ``CardUuidMismatch`` per refused XPU, else one ``NumaNotFit``."""
    cards, uses = xpus(*used)
    request = container_request({XPU: 4}, {})
    opts = pod_options(annotations, "spread", frozenset())
    got = fit_node(cards, uses, [(False, request)], opts, "kunlun", KUNLUN_XPU.walk)
    assert (got.grants, got.reason) == (None, reason)


def test_wings_are_counted_by_position_in_hamis_card_order() -> None:
    """``fitInDevices`` sorts the cards before ``Fit``, and ``graghSelect`` counts its wings by
    position in that order: under spread a used XPU sorts first, so four XPUs asked beside a
    used one come from positions 4-7 (XPUs 3, 4, 6, 7), as HAMi takes them."""
    cards, uses = xpus(5)
    request = container_request({XPU: 4}, {})
    opts = pod_options({}, "spread", frozenset())
    got = fit_node(cards, uses, [(False, request)], opts, "kunlun", KUNLUN_XPU.walk)
    assert got.grants is not None
    assert [g.uuid for g in got.grants[0]] == [f"n1-kunlun-{i}" for i in (3, 4, 6, 7)]


# -- vdevice_test.go --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "want"),
    [(0, 24576), (24576, 24576), (24577, 49152), (49152, 49152), (49153, 98304), (200000, 98304)],
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
        ({VXPU: 1}, {}, CardRequest("XPU", 1, 98304, 100, 100)),
        ({VXPU: 2}, {VMEM: 20000}, CardRequest("XPU", 2, 24576, 0, 25)),
    ],
    ids=[
        "no vcount requested",
        "vcount without memory defaults to full device",
        "vcount with memory from requests fallback",
    ],
)
def test_vxpu_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], want: CardRequest | None
) -> None:
    """``Test_KunlunVDevices_GenerateResourceRequests``."""
    assert vxpu_request(limits, requests) == want


def test_get_node_devices_reads_the_vxpu_registration() -> None:
    """``Test_GetNodeDevices``: invalid JSON and an empty list are refused."""
    card = {"id": "xpu-0", "count": 4, "devmem": 98304, "devcore": 100, "type": "P800"}
    got = node_cards(KUNLUN_VXPU, NodeView("n1", {REGISTER_ANNOTATION: json.dumps([card])}))
    assert not isinstance(got, str)
    assert [(c.id, c.type) for c in got] == [("xpu-0", "XPU-P800")]
    with pytest.raises(RegistrationError, match="no device found on node"):
        registered_cards("[]")
    assert isinstance(node_cards(KUNLUN_VXPU, NodeView("n1", {REGISTER_ANNOTATION: "{"})), str)


@pytest.mark.parametrize(
    ("use", "memreq", "fits"),
    [
        (CardUse(), 98304, True),
        (CardUse(1, 24576, 25), 24576, True),
        (CardUse(1, 24576, 25), 49152, False),
        (CardUse(3, 73728, 75), 49152, False),
    ],
    ids=[
        "an unused XPU takes any size",
        "a used XPU takes the same size",
        "a used XPU refuses another size",
        "no memory left",
    ],
)
def test_fit_vxpu(use: CardUse, memreq: int, fits: bool) -> None:
    """``FitVXPU``."""
    card = Card("xpu-0", 4, 98304, 100, "XPU", True)
    assert fit_vxpu(card, use, memreq) is fits


def test_vxpus_share_an_xpu_by_partitions_of_one_size_and_mutex_says_so() -> None:
    """``KunlunVDevices.Fit`` under ``mutex``: used XPUs that would fit are
    ``ExclusiveDeviceAllocateConflict``."""
    cards = [Card(f"xpu-{i}", 4, 98304, 100, "XPU", True, i) for i in range(2)]
    used = [CardUse(1, 24576, 25), CardUse(1, 24576, 25)]
    request = vxpu_request({VXPU: 1, VMEM: 24576}, {})
    assert request is not None
    spread = pod_options({}, "spread", frozenset())
    assert KUNLUN_VXPU.walk is not None
    grants, _, _ = KUNLUN_VXPU.walk(cards, used, request, spread, "XPU", NO_GIVEN)
    assert grants == [Grant("xpu-0", "XPU", 24576, 25)]
    mutex = pod_options({"hami.io/gpu-scheduler-policy": "mutex"}, "spread", frozenset())
    got = fit_node(cards, used, [(False, request)], mutex, "XPU", KUNLUN_VXPU.walk)
    assert (got.grants, got.reason) == (None, "2/2 ExclusiveDeviceAllocateConflict")


def test_vxpu_bind_annotations_and_lock() -> None:
    """``Test_KunlunVDevices_PatchAnnotations`` and ``LockNode``'s key."""
    grant = Grant("xpu-0", "XPU", 24576, 100)
    notes = KUNLUN_VXPU.bind_annotations("n1", [[grant]], 0.0)
    assert notes["hami.io/xpu-devices-to-allocate"] == "xpu-0,XPU,24576,100:;"
    assert notes["hami.io/xpu-devices-allocated"] == "xpu-0,XPU,24576,100:;"
    assert KUNLUN_VXPU.keys.lock == "hami.io/mutex.lock"
    assert KUNLUN_XPU.keys.lock == ""
