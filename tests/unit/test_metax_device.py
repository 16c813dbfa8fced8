"""MetaX GPUs taken whole, the HAMi way: tables after HAMi's ``pkg/device/metax/device_test.go``.

Each test names the Go test it follows; each row is named by its Go case. ``Test_MutateAdmission``
(HAMi's webhook) has no counterpart: Caldera is the scheduler alone.
"""

from __future__ import annotations

import re

import pytest

from caldera.devices.fit import CardUse, fit_node, pod_usage
from caldera.devices.metax import (
    COUNT,
    LOSS_ANNOTATION,
    METAX_GPU,
    SCORE_ANNOTATION,
    VENDOR,
    capacity_cards,
    container_request,
    custom_filter_rule,
    node_score,
    topology_value,
    walk,
)
from caldera.devices.model import Card, CardRequest, Grant, NodeView, RegistrationError
from caldera.devices.vendors import VENDORS, node_cards
from devices_cases import FitCase, Gpu, hami_fit_cases, walk_fit

# -- GetNodeDevices --------------------------------------------------------------------------------


def test_get_node_devices_lists_one_card_per_unit_of_capacity() -> None:
    """``TestGetNodeDevices`` "Test with valid node": ``test-metax-0``, 65536 MiB, 100 cores.
    The Go row writes ``Count: 100`` but does not check it; ``GetNodeDevices`` gives 1 slot."""
    cards = capacity_cards("test", {}, {COUNT: 1})
    assert cards == [Card("test-metax-0", 1, 65536, 100, VENDOR, True, 0, 0, mode="")]


def test_a_node_with_four_cards_has_four_whole_cards() -> None:
    """``GetNodeDevices``: ``for int64(i) < count``, ids ``<node>-metax-<i>``."""
    cards = capacity_cards("n1", {}, {COUNT: 4})
    assert [(c.id, c.index, c.count) for c in cards] == [(f"n1-metax-{i}", i, 1) for i in range(4)]


@pytest.mark.parametrize(
    "capacity",
    [{COUNT: 0}, {COUNT: 1.5}, {}],
    ids=["zero cards", "a count that is not a whole number", "no capacity"],
)
def test_a_node_without_a_whole_card_count_has_no_device(capacity: dict[str, float]) -> None:
    """``GetNodeDevices``: ``AsInt64`` fails or the count is 0: "device not found"."""
    with pytest.raises(RegistrationError, match=re.escape(f"device not found {COUNT}")):
        capacity_cards("n1", {}, capacity)


def test_the_cards_are_read_from_the_nodes_capacity_through_the_vendor_seam() -> None:
    got = node_cards(METAX_GPU, NodeView("n1", {}, {COUNT: 2}))
    assert isinstance(got, tuple) and [c.id for c in got] == ["n1-metax-0", "n1-metax-1"]
    assert node_cards(METAX_GPU, NodeView("cpu", {}, {})) == ()
    assert METAX_GPU.source == f"status.capacity[{COUNT}]"
    assert METAX_GPU in VENDORS and METAX_GPU.family == "metax"


# -- parseMetaxAnnos and ScoreNode -----------------------------------------------------------------

SCORES = '{"1":0,"2":110,"3":270,"4":540,"5":580,"6":730,"7":930,"8":1240}'


@pytest.mark.parametrize(
    ("cards", "value"),
    [(1, 0), (2, 110), (3, 270), (4, 540), (5, 580), (6, 730), (7, 930), (8, 1240)],
    ids=[f"{SCORES}#{i:02d}" if i else SCORES for i in range(8)],
)
def test_parse_metax_annos(cards: int, value: float) -> None:
    """``TestParseMetaxAnnos``: the value for the pod's card count."""
    assert topology_value(SCORES, cards) == value


@pytest.mark.parametrize(
    "text",
    ['{"1":0}', "not json", '{"1":1.5}', '{"one":1}', "[1, 2]"],
    ids=[
        "no entry for the count",
        "not JSON",
        "a value that is not an integer",
        "a key that is not a number",
        "not an object",
    ],
)
def test_an_unreadable_topology_annotation_reads_as_zero(text: str) -> None:
    """``parseMetaxAnnos``: ``json.Unmarshal`` into ``map[int]int`` fails, or no entry: 0."""
    assert topology_value(text, 2) == 0.0


def _grants(n: int) -> list[list[Grant]]:
    return [[Grant(f"test-{i}", VENDOR, 1000, 1) for i in range(n)]]


@pytest.mark.parametrize(
    ("annotations", "cards", "policy", "expected"),
    [
        ({LOSS_ANNOTATION: '{"1":100,"2":200}'}, 2, "binpack", 1800.0),
        ({SCORE_ANNOTATION: '{"1":100,"2":200}'}, 1, "spread", 1900.0),
        ({}, 1, "binpack", 0.0),
        ({LOSS_ANNOTATION: '{"1":100}', SCORE_ANNOTATION: '{"1":300}'}, 1, "spread", 1700.0),
        ({LOSS_ANNOTATION: '{"1":100}'}, 1, "topology", 0.0),
    ],
    ids=[
        "policy is binpack",
        "policy is spread",
        "no topology annotation",
        "spread reads the scores, not the losses",
        "another policy",
    ],
)
def test_score_node(annotations: dict[str, str], cards: int, policy: str, expected: float) -> None:
    """``Test_ScoreNode``: 2000 less the loss (binpack) or the score (spread) for the pod's cards
    summed over its containers."""
    assert node_score(annotations, _grants(cards), policy) == expected


def test_the_card_count_of_the_score_sums_every_container() -> None:
    """``ScoreNode``: ``sum += len(dev)`` over the pod's containers."""
    containers = [[Grant("a", VENDOR, 1, 1)], [], [Grant("b", VENDOR, 1, 1)]]
    assert node_score({LOSS_ANNOTATION: '{"2":150}'}, containers, "binpack") == 1850.0


# -- GenerateResourceRequests ----------------------------------------------------------------------

WHOLE = CardRequest(VENDOR, 1, 0, 100, 100)


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        ({COUNT: 1}, {COUNT: 1}, WHOLE),
        ({}, {}, None),
        ({}, {COUNT: 2}, CardRequest(VENDOR, 2, 0, 100, 100)),
        ({COUNT: 0.5}, {}, None),
        ({COUNT: 0}, {}, None),
        ({COUNT: 2**32 + 1}, {}, WHOLE),
    ],
    ids=[
        "resource set to limit and request",
        "resource don't set to limit and request",
        "the count read from requests when limits name none",
        "a count that is not a whole number asks for nothing",
        "a count of zero asks for nothing",
        "the count narrowed to int32 as Go does",
    ],
)
def test_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], expected: CardRequest | None
) -> None:
    """``Test_GenerateResourceRequests``: whole cards, 100 % memory, 100 cores."""
    assert container_request(limits, requests) == expected


# -- customFilterRule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("card", "expected"),
    [("test-0000", True), ("test-1111", False)],
    ids=["allocated id is same as device id", "allocated id is different from device id"],
)
def test_custom_filter_rule(card: str, expected: bool) -> None:
    """``Test_CustomFilterRule``: the pod's earlier container holds ``test-0000``."""
    earlier = [[Grant("test-0000", VENDOR, 1000, 1)]]
    assert custom_filter_rule(earlier, Card(card, 1, 65536, 100, VENDOR, True)) is expected


# -- Fit -------------------------------------------------------------------------------------------


FIT_CASES = {
    **hami_fit_cases(),
    # customFilterRule in the walk: the pod's earlier container holds dev-0
    "a card other than the one the pod's earlier container holds is refused": FitCase(
        [Gpu("dev-0", used=(1, 0, 0), count=1), Gpu("dev-1", count=1)],
        (1, 64, 0, 50),
        None,
        "1/2 CardNotFoundCustomFilterRule, 1/2 CardTimeSlicingExhausted",
        earlier=(Grant("dev-0", VENDOR, 64, 50),),
    ),
    "the card the pod's earlier container holds passes the custom rule": FitCase(
        [Gpu("dev-0"), Gpu("dev-1")],
        (1, 64, 0, 50),
        ["dev-0"],
        "",
        earlier=(Grant("dev-0", VENDOR, 64, 50),),
    ),
}


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_metax_devices_fit(case: FitCase) -> None:
    """``TestMetaxDevices_Fit``, and ``customFilterRule`` inside the walk."""
    got = walk_fit(case, vendor=METAX_GPU, word=VENDOR, walk=walk)
    assert got == (case.chosen, case.reason)


def test_fit_node_gives_a_container_whole_cards_from_the_last() -> None:
    """``Fit`` through the seam: two whole cards of four, the walk from the end of HAMi's order,
    a used card refused whole (``Count`` 1)."""
    cards = capacity_cards("n1", {}, {COUNT: 4})
    uses = [CardUse(), CardUse(), CardUse(), CardUse(1, 65536, 100)]
    request = container_request({COUNT: 2}, {})
    opts = METAX_GPU.read_options({}, "spread", frozenset())
    got = fit_node(cards, uses, [(False, request)], opts, VENDOR, METAX_GPU.walk)
    assert got.grants == [
        [Grant("n1-metax-2", VENDOR, 65536, 100), Grant("n1-metax-1", VENDOR, 65536, 100)]
    ]
    full = fit_node(cards, [CardUse(1, 65536, 100)] * 4, [(False, request)], opts, VENDOR, walk)
    assert full.reason == "4/4 CardTimeSlicingExhausted"


def test_add_resource_usage() -> None:
    """``TestMetaxDevices_AddResourceUsage``: one slot, the cores and the memory added."""
    use = CardUse(0, 2000, 15)
    added = pod_usage(0, [[Grant("dev-0", VENDOR, 1024, 50)]])["dev-0"]
    assert (use.used + added.used, use.usedmem + added.usedmem) == (1, 3024)
    assert use.usedcores + added.usedcores == 65


# -- PatchAnnotations and LockNode -----------------------------------------------------------------


def test_patch_annotations_writes_the_metax_gpu_allocation() -> None:
    """``PatchAnnotations``: the allocation on ``hami.io/metax-gpu-devices-to-allocate`` and
    ``-allocated``, beside HAMi's own bind annotations; nothing of MetaX's own."""
    containers = [[], [Grant("n1-metax-1", VENDOR, 65536, 100)]]
    got = METAX_GPU.bind_annotations("n1", containers, 1_800_000_000.0)
    allocation = ";n1-metax-1,Metax-GPU,65536,100:;"
    assert got == {
        "hami.io/vgpu-node": "n1",
        "hami.io/vgpu-time": "1800000000",
        "hami.io/metax-gpu-devices-to-allocate": allocation,
        "hami.io/metax-gpu-devices-allocated": allocation,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1800000000",
    }


def test_lock_node_takes_no_lock() -> None:
    """``LockNode`` returns nil: no node lock for MetaX GPUs."""
    assert METAX_GPU.keys.lock == ""
