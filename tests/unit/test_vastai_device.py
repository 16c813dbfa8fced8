"""Vastai accelerators the HAMi way: tables after HAMi's ``pkg/device/vastai/device_test.go``.

Each test names the Go test it follows; each row is named by its Go case. ``TestDevices_Fit``
calls ``VastaiDevices.Fit`` directly, so its rows run the vendor's walk; the rows HAMi's
``fitInDevices`` would reach also run through :func:`~caldera.devices.fit.fit_node`. The die
mode and ``ScoreNode`` have tables of their own, after the Go code (HAMi tests the score not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

import devices_cases
from caldera.devices.fit import NO_GIVEN, CardUse, FitOptions, fit_node, pod_usage, reason_text
from caldera.devices.hami import DEFAULTS
from caldera.devices.model import Card, CardRequest, Grant, NodeView, RegistrationError
from caldera.devices.vastai import (
    COUNT,
    REGISTER_ANNOTATION,
    VASTAI,
    DieCard,
    best_combination,
    die_score,
    registered_cards,
)
from caldera.devices.vendors import FAMILIES, VENDORS, enabled_vendors, node_cards
from devices_cases import MUTEX, whole_card_request_cases

WORD = "Vastai"


def die(
    uuid: str, aic: str | None, count: int = 1, strategy: str | None = "die", index: int = 0
) -> DieCard:
    """A device whose ``custominfo`` is ``{"DeviceStrategy": strategy, "AIC": aic}`` (a None
    leaves the key out)."""
    return DieCard(
        uuid,
        count,
        0,
        100,
        WORD,
        True,
        index,
        custom_info=True,
        strategy=strategy,
        aic=aic,
        aic_given=aic is not None,
    )


# -- registration ------------------------------------------------------------------------------


def test_get_node_devices_reads_hamis_json_and_gives_every_card_full_compute() -> None:
    """``Test_GetNodeDevices`` "exist vastai device"."""
    text = (
        '[{"id":"7-0","count":1,"devmem":32768,"type":"Vastai","health":true,"devicepairscore":{}}]'
    )
    assert registered_cards(text) == [
        Card("7-0", 1, 32768, 100, "Vastai", True, index=0, numa=0, mode="")
    ]


def test_a_node_without_the_annotation_has_no_vastai_card() -> None:
    """``Test_GetNodeDevices`` "no annotation": no cards (HAMi: "annos not found", skipped)."""
    assert node_cards(VASTAI, NodeView("n1", {})) == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (":", "not valid JSON"),
        ("", "not valid JSON"),
        ("[]", "no gpu found on node"),
        ('[{"id":"d0","custominfo":"die"}]', "custominfo: expected an object"),
    ],
    ids=[
        "no vasta device",
        "node annotations not decode successfully",
        "an empty list is no gpu found on node",
        "a custominfo that is not an object fails Go's decoder",
    ],
)
def test_get_node_devices_refuses_what_go_refuses(text: str, says: str) -> None:
    """``Test_GetNodeDevices``: JSON only; no card is "no gpu found on node"."""
    with pytest.raises(RegistrationError, match=says):
        registered_cards(text)
    got = node_cards(VASTAI, NodeView("n1", {REGISTER_ANNOTATION: text}))
    assert isinstance(got, str) and says in got


@pytest.mark.parametrize(
    ("custom", "expected"),
    [
        ({"DeviceStrategy": "die", "AIC": "3"}, (True, "die", "3", True)),
        ({"DeviceStrategy": "card"}, (True, "card", None, False)),
        ({"AIC": 3}, (True, None, None, True)),
        ({}, (True, None, None, False)),
        ({"aic": "3", "devicestrategy": "die"}, (True, None, None, False)),
    ],
    ids=[
        "a die and its AIC",
        "whole cards",
        "an AIC that is not a string is not an AIC id",
        "an empty custominfo is still given",
        "custominfo keys are case-sensitive (a Go map)",
    ],
)
def test_the_die_info_is_read_from_custominfo(
    custom: dict[str, object], expected: tuple[bool, str | None, str | None, bool]
) -> None:
    """``GetNodeDevices`` keeps ``CustomInfo``; ``isDieMode``, ``aicID`` and ``ScoreNode`` read
    its ``DeviceStrategy`` and ``AIC`` (string values only)."""
    text = json.dumps(
        [{"id": "d0", "count": 1, "type": WORD, "health": True, "CustomInfo": custom}]
    )
    (card,) = registered_cards(text)
    assert isinstance(card, DieCard)
    assert (card.custom_info, card.strategy, card.aic, card.aic_given) == expected
    assert card.devcore == 100


def test_a_device_without_custominfo_is_a_plain_card() -> None:
    """``CustomInfo`` null is Go's nil map: no die info (``ScoreNode`` then scores 0)."""
    text = '[{"id":"d0","count":1,"type":"Vastai","health":true,"custominfo":null}]'
    assert registered_cards(text) == [Card("d0", 1, 0, 100, WORD, True, mode="")]


# -- requests ----------------------------------------------------------------------------------


def _request(nums: int) -> CardRequest:
    return CardRequest(WORD, nums, 0, 100, 0)


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        *whole_card_request_cases(count=COUNT, word=WORD),
        pytest.param(
            {COUNT: 0},
            {},
            None,
            id="a count of zero asks for nothing (Resourcereqs keeps Nums > 0)",
        ),
        pytest.param({COUNT: 0.5}, {}, None, id="a fraction is not AsInt64's"),
    ],
)
def test_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], expected: CardRequest | None
) -> None:
    """``Test_GenerateResourceRequests``: whole devices, no memory (percentage 100), no cores."""
    assert VASTAI.read_request(limits, requests, DEFAULTS) == expected


@pytest.mark.parametrize(
    ("word", "refused"),
    [(WORD, None), ("test", "1/1 CardTypeMismatch")],
    ids=["the same type", "the different type"],
)
def test_check_type_compares_the_requests_type_alone(word: str, refused: str | None) -> None:
    """``Test_checkType``: a ``Vastai`` device suits a ``Vastai`` request only."""
    assert VASTAI.walk is not None
    cards = [Card("dev-0", 1, 0, 100, WORD, True)]
    request = CardRequest(word, 1, 0, 100, 0)
    grants, reasons, _ = VASTAI.walk(cards, [CardUse()], request, FitOptions(), WORD, NO_GIVEN)
    assert (reason_text(reasons, 1) if grants is None else None) == refused


# -- fit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitCase:
    cards: list[Card]
    used: list[int]
    request: tuple[int, int, int]
    """(nums, memreq, coresreq); the memory percentage is 0 in every Go case."""
    chosen: list[str] | None
    reason: str = ""
    pod: dict[str, str] = field(default_factory=dict)
    word: str = WORD


def plain(uuid: str, count: int = 1, mem: int = 0, core: int = 0, health: bool = True) -> Card:
    return Card(uuid, count, mem, core, WORD, health)


def _vastai(case: devices_cases.FitCase) -> FitCase:
    """A row of HAMi's whole-card table as Vastai's: plain devices, as they stand."""
    nums, memreq, _, cores = case.request
    used = [g.used[0] for g in case.gpus]
    word = WORD if case.word is None else case.word
    cards = devices_cases.case_cards(case, WORD)
    return FitCase(cards, used, (nums, memreq, cores), case.chosen, case.reason, case.pod, word)


FIT_CASES = {
    **{
        name: _vastai(case)
        for name, case in devices_cases.whole_card_fit_cases(
            use_uuid="vastaitech.com/use-gpuuuid",
            nouse_uuid="vastaitech.com/nouse-gpuuuid",
            several_cards_row="fit fail: partial allocation AllocatedCardsInsufficientRequest",
        ).items()
    },
    "mutex die mode rejects idle die on occupied card, picks die on free card": FitCase(
        [die("dev-0", "1", count=2), die("dev-1", "1", index=1), die("dev-2", "2", index=2)],
        [1, 0, 0],
        (1, 0, 0),
        ["dev-2"],
        pod=MUTEX,
    ),
    "mutex die mode rejects all idle dies on an occupied card": FitCase(
        [die("dev-0", "1", count=2), die("dev-1", "1", index=1)],
        [1, 0],
        (1, 0, 0),
        None,
        "2/2 ExclusiveDeviceAllocateConflict",
        pod=MUTEX,
    ),
}


def _node(case: FitCase) -> tuple[list[CardUse], CardRequest, FitOptions]:
    nums, memreq, cores = case.request
    request = CardRequest(case.word, nums, memreq, 0, cores)
    opts = VASTAI.read_options(case.pod, "spread", frozenset())
    return [CardUse(u) for u in case.used], request, opts


def _walk(case: FitCase) -> tuple[list[str] | None, str]:
    uses, request, opts = _node(case)
    assert VASTAI.walk is not None
    grants, reasons, out_of = VASTAI.walk(case.cards, uses, request, opts, WORD, NO_GIVEN)
    assert out_of is None
    return devices_cases.verdict(grants, reasons, len(case.cards))


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_devices_fit(case: FitCase) -> None:
    """``TestDevices_Fit``: ``VastaiDevices.Fit`` of one container, the devices chosen and the
    reason."""
    assert _walk(case) == (case.chosen, case.reason)


REACHED = {k: c for k, c in FIT_CASES.items() if c.request[0] <= len(c.cards)}


@pytest.mark.parametrize("case", REACHED.values(), ids=REACHED.keys())
def test_the_node_fit_gives_the_walks_verdict(case: FitCase) -> None:
    """``fitInDevices`` then ``TestDevices_Fit``: through ``fit_node`` with the vendor's walk."""
    uses, request, opts = _node(case)
    got = fit_node(case.cards, uses, [(False, request)], opts, WORD, VASTAI.walk)
    chosen = None if got.grants is None else [g.uuid for g in got.grants[0]]
    assert (chosen, got.reason) == (case.chosen, case.reason)


def test_a_node_with_fewer_devices_than_asked_is_refused_before_the_walk() -> None:
    """``fitInDevices``: ``NodeInsufficientDevice`` when ``Nums`` exceeds the node's devices."""
    case = FIT_CASES["fit fail:  AllocatedCardsInsufficientRequest"]
    uses, request, opts = _node(case)
    got = fit_node(case.cards, uses, [(False, request)], opts, WORD, VASTAI.walk)
    assert (got.grants, got.reason) == (None, "1/1 NodeInsufficientDevice")


FOUR_DIES: list[Card] = [
    die("a1-0", "1"),
    die("a1-1", "1", index=1),
    die("a2-0", "2", index=2),
    die("a2-1", "2", index=3),
]
"""Two AICs of two dies; HAMi's order keeps them as listed (no memory: every score is 0)."""
FIVE_DIES: list[Card] = [*FOUR_DIES, die("a3-0", "3", index=4)]

DIE_CASES = {
    "one die asked: the first the walk meets": FitCase(FOUR_DIES, [0] * 4, (1, 0, 0), ["a2-1"]),
    "as many dies pass as asked: all of them, as met": FitCase(
        FIVE_DIES, [0, 1, 0, 0, 0], (4, 0, 0), ["a3-0", "a2-1", "a2-0", "a1-0"]
    ),
    "more pass than asked: the AIC holding the most first": FitCase(
        FIVE_DIES, [0, 1, 0, 0, 0], (2, 0, 0), ["a2-1", "a2-0"]
    ),
    "more pass than asked: across AICs, the fullest first": FitCase(
        FIVE_DIES, [0] * 5, (4, 0, 0), ["a2-1", "a2-0", "a1-1", "a1-0"]
    ),
    "too few dies pass": FitCase(
        FOUR_DIES,
        [1, 1, 1, 0],
        (2, 0, 0),
        None,
        "1/4 AllocatedCardsInsufficientRequest, 3/4 CardTimeSlicingExhausted",
    ),
    "a die naming no AIC is never chosen among several": FitCase(
        [die("x", None), die("a1-0", "1", index=1), die("a1-1", "1", index=2)],
        [0, 0, 0],
        (2, 0, 0),
        ["a1-1", "a1-0"],
    ),
    "dies naming no AIC may leave the choice short, and HAMi still fits": FitCase(
        [die("x", None), die("y", None, index=1), die("a1-0", "1", index=2)],
        [0, 0, 0],
        (2, 0, 0),
        ["a1-0"],
    ),
    "the first card in HAMi's order is a die: die mode": FitCase(
        [die("d0", "1"), die("d1", "2", index=1), die("d2", "1", index=2), plain("p3")],
        [0] * 4,
        (2, 0, 0),
        ["d2", "d0"],
    ),
    "the first card in HAMi's order is not a die: the walk stops when it has enough": FitCase(
        [plain("p0"), die("d1", "1", index=1), die("d2", "2", index=2), die("d3", "1", index=3)],
        [0] * 4,
        (2, 0, 0),
        ["d3", "d2"],
    ),
    "an idle die on an AIC in use is not refused without mutex": FitCase(
        [die("a1-0", "1", count=2), die("a1-1", "1", index=1)], [1, 0], (1, 0, 0), ["a1-1"]
    ),
}


@pytest.mark.parametrize("case", DIE_CASES.values(), ids=DIE_CASES.keys())
def test_die_mode_collects_every_passing_die_then_chooses(case: FitCase) -> None:
    """``VastaiDevices.Fit`` in die mode (``isDieMode``): no early stop; as many as asked: all;
    more, one asked: the first met (``tmpDevs[0]``); more, several asked:
    ``computeBestCombination``."""
    assert _walk(case) == (case.chosen, case.reason)


def test_the_mutex_policy_sends_every_node_to_the_walk() -> None:
    """The arrays cannot see a die's AIC: under mutex only the walk decides."""
    assert VASTAI.walk_decides is not None
    mutex = VASTAI.read_options(MUTEX, "spread", frozenset())
    spread = VASTAI.read_options({}, "spread", frozenset())
    assert VASTAI.walk_decides(_request(1), mutex)
    assert not VASTAI.walk_decides(_request(1), spread)


BEST_CASES = {
    "single AIC group, sufficient to meet demand": (
        2,
        [("dev1", "1"), ("dev2", "1"), ("dev3", "1")],
        ["dev1", "dev2"],
    ),
    "multiple AIC groups, select by count after sorting": (
        3,
        [("dev1", "1"), ("dev2", "1"), ("dev3", "1"), ("dev4", "2"), ("dev5", "2"), ("dev6", "3")],
        ["dev1", "dev2", "dev3"],
    ),
    "multiple AIC groups, need to take across groups": (
        4,
        [("dev1", "1"), ("dev2", "1"), ("dev3", "1"), ("dev4", "2"), ("dev5", "2"), ("dev6", "3")],
        ["dev1", "dev2", "dev3", "dev4"],
    ),
    "request number exceeds available devices": (
        5,
        [("dev1", "1"), ("dev2", "1"), ("dev3", "2")],
        ["dev1", "dev2", "dev3"],
    ),
}


@pytest.mark.parametrize(("wanted", "dies", "expected"), BEST_CASES.values(), ids=BEST_CASES.keys())
def test_compute_best_combination(
    wanted: int, dies: list[tuple[str, str]], expected: list[str]
) -> None:
    """``TestComputeBestCombination``: the AICs with the most dies first, each taken whole."""
    taken = [(die(uuid, aic), Grant(uuid, WORD, 0, 0)) for uuid, aic in dies]
    assert [g.uuid for g in best_combination(taken, wanted)] == expected


# -- score -------------------------------------------------------------------------------------

SCORED = [
    die("a1-0", "1"),
    die("a1-1", "1"),
    die("a2-0", "2"),
    DieCard("odd", 1, 0, 100, WORD, True, custom_info=True, strategy="die", aic_given=True),
    DieCard("card", 1, 0, 100, WORD, True, custom_info=True, strategy="card", aic="9"),
    DieCard("bare", 1, 0, 100, WORD, True, custom_info=True),
    plain("plain"),
]

SCORE_CASES = {
    "one container, its dies on one AIC": ([["a1-0", "a1-1"]], 1.0),
    "one container, two dies of three on one AIC": ([["a1-0", "a1-1", "a2-0"]], 2 / 3),
    "one score per container, summed": ([["a1-0"], ["a1-1", "a2-0"]], 1.5),
    "a container without devices is skipped": ([[], ["a1-0"]], 1.0),
    "an AIC that is not a string is not counted": ([["a1-0", "odd"]], 1.0),
    "a device without custominfo scores the pod 0": ([["a1-0"], ["plain"]], 0.0),
    "a strategy other than die scores the pod 0": ([["a1-0"], ["card"]], 0.0),
    "a device naming no AIC scores the pod 0": ([["a1-0"], ["bare"]], 0.0),
}


@pytest.mark.parametrize(("containers", "score"), SCORE_CASES.values(), ids=SCORE_CASES.keys())
def test_score_node_rewards_dies_on_one_aic(containers: list[list[str]], score: float) -> None:
    """``VastaiDevices.ScoreNode``: per container, the share of its dies on its busiest AIC."""
    grants = [[Grant(uuid, WORD, 0, 0) for uuid in c] for c in containers]
    assert die_score(SCORED, grants) == pytest.approx(score)


# -- usage, bind, lock -------------------------------------------------------------------------


def test_a_granted_device_is_charged_one_slot_and_nothing_else() -> None:
    """``Fit`` sets no ``Usedmem`` and ``Usedcores = Coresreq`` (0); ``AddResourceUsage`` adds
    one use (``TestDevices_AddResourceUsage``: used 1 becomes 2)."""
    cards = [plain("dev-0", count=4, mem=16384, core=100)]
    got = fit_node(cards, [CardUse(1)], [(False, _request(1))], FitOptions(), WORD, VASTAI.walk)
    assert got.grants == [[Grant("dev-0", WORD, 0, 0)]]
    added = pod_usage(0, got.grants)["dev-0"]
    assert (1 + added.used, added.usedmem, added.usedcores) == (2, 0, 0)


def test_patch_annotations() -> None:
    """``Test_PatchAnnotations`` "exist device": ``EncodePodSingleDevice`` on
    ``hami.io/Vastai-devices-to-allocate`` and ``-allocated``, beside HAMi's shared keys."""
    got = VASTAI.bind_annotations("n1", [[Grant("test1", WORD, 2048, 1)]], 1_800_000_000.0)
    assert got["hami.io/Vastai-devices-to-allocate"] == "test1,Vastai,2048,1:;"
    assert got["hami.io/Vastai-devices-allocated"] == "test1,Vastai,2048,1:;"
    assert set(got) == set(VASTAI.written)


def test_patch_annotations_no_device() -> None:
    """``Test_PatchAnnotations`` "no device": no Vastai request, nothing of Vastai's written."""
    assert VASTAI.read_request({"cpu": 1}, {}, DEFAULTS) is None
    assert VASTAI.more_annotations is None


def test_the_node_lock_is_hamis_shared_lock() -> None:
    """``TestDevices_LockNode`` / ``ReleaseNodeLock``: ``nodelock.NodeLockKey``."""
    assert VASTAI.keys.lock == "hami.io/mutex.lock"
    assert not VASTAI.bare_lock and VASTAI.lock_expiry is None


def test_a_container_limiting_the_count_is_vastais() -> None:
    """``Test_MutateAdmission`` "set to resource limits": ``vastaitech.com/va`` is the vendor's."""
    assert enabled_vendors(frozenset({COUNT})) == (VASTAI,)


def test_vastai_is_an_opt_in_family_of_hamis_device_configmap() -> None:
    assert VASTAI in VENDORS and "vastai" in FAMILIES and VASTAI.family == "vastai"
