"""HAMi's device fit, scores and card order (hami.md §3.5, §4, §5), case by case."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from caldera.devices.fit import CardUse, FitOptions, card_order, fit_node, pod_usage
from caldera.devices.hami import encode_allocation
from caldera.devices.model import UNSET_PERCENTAGE, Card, CardRequest, Grant
from caldera.devices.table import DeviceTable

T4 = "NVIDIA-Tesla T4"


def card(
    uuid: str,
    *,
    count: int = 10,
    mem: int = 16000,
    core: int = 100,
    type: str = T4,
    health: bool = True,
    numa: int = 0,
) -> Card:
    return Card(uuid, count, mem, core, type, health, numa=numa)


def req(nums: int = 1, mem: int = 1000, cores: int = 0, pct: int = UNSET_PERCENTAGE) -> CardRequest:
    return CardRequest("NVIDIA", nums, mem, pct, cores)


def one_node(cards: Sequence[Card]) -> DeviceTable:
    """A device table holding one node with these cards, none in use."""
    return DeviceTable("NVIDIA", [cards], [frozenset()])


def app(request: CardRequest | None) -> tuple[bool, CardRequest | None]:
    return (False, request)


def init(request: CardRequest | None) -> tuple[bool, CardRequest | None]:
    return (True, request)


@pytest.mark.parametrize(
    ("case", "cards", "uses", "score"),
    [
        (
            "hami.md node1",
            [card("a", mem=8000), card("b", mem=8000)],
            [CardUse(1, 2000, 25), CardUse()],
            3.0,
        ),
        (
            "hami.md node2",
            [card("a", mem=8000), card("b", mem=8000)],
            [CardUse(1, 6000, 75), CardUse()],
            8.0,
        ),
        ("hami.md single card", [card("a", mem=8000)], [CardUse(5, 4000, 50)], 15.0),
        ("a card with no memory registered scores 0", [card("a", mem=0)], [CardUse(1, 0, 0)], 0.0),
    ],
)
def test_the_node_score_is_hamis(
    case: str, cards: list[Card], uses: list[CardUse], score: float
) -> None:
    table = one_node(cards)
    table.apply(0, {c.id: u for c, u in zip(cards, uses, strict=True)})
    assert table.node_scores(np.array([0]))[0] == pytest.approx(score), case


def test_two_idle_cards_tie_and_the_last_registered_wins() -> None:
    cards = [card("uuid1"), card("uuid2")]
    for policy in ("spread", "binpack"):
        fit = fit_node(cards, [CardUse(), CardUse()], [app(req())], FitOptions(gpu_policy=policy))
        assert fit.grants == [[Grant("uuid2", "NVIDIA", 1000, 0)]], policy


def test_two_cards_for_one_container_are_written_last_registered_first() -> None:
    fit = fit_node(
        [card("uuid1"), card("uuid2")],
        [CardUse(), CardUse()],
        [app(req(nums=2, mem=1000, cores=30))],
        FitOptions(),
    )
    assert fit.grants is not None
    assert encode_allocation(fit.grants) == "uuid2,NVIDIA,1000,30:uuid1,NVIDIA,1000,30:;"


def test_spread_tries_the_least_used_card_first_and_binpack_the_most_used() -> None:
    cards = [card("busy"), card("idle")]
    uses = [CardUse(1, 4000, 20), CardUse()]
    spread = fit_node(cards, uses, [app(req())], FitOptions(gpu_policy="spread"))
    binpack = fit_node(cards, uses, [app(req())], FitOptions(gpu_policy="binpack"))
    assert spread.grants is not None and spread.grants[0][0].uuid == "idle"
    assert binpack.grants is not None and binpack.grants[0][0].uuid == "busy"
    assert card_order(cards, uses, req(), FitOptions(gpu_policy="mutex"))[-1] == 1  # idle last


@pytest.mark.parametrize(
    ("case", "cards", "uses", "asked", "opts", "reason"),
    [
        (
            "unhealthy and too small",
            [card("a", health=False), card("b", mem=500)],
            [CardUse(), CardUse()],
            req(mem=1000),
            FitOptions(),
            "1/2 CardInsufficientMemory, 1/2 CardNotHealth",
        ),
        (
            "more cards asked than the node has",
            [card("a")],
            [CardUse()],
            req(nums=2),
            FitOptions(),
            "1/1 NodeInsufficientDevice",
        ),
        (
            "only one of two asked cards fits",
            [card("a"), card("b", mem=500)],
            [CardUse(), CardUse()],
            req(nums=2),
            FitOptions(),
            "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory",
        ),
        (
            "every slot taken",
            [card("a", count=2)],
            [CardUse(2, 0, 0)],
            req(),
            FitOptions(),
            "1/1 CardTimeSlicingExhausted",
        ),
        (
            "an exclusive request on a card shared with a no-compute user",
            [card("a")],
            [CardUse(1, 100, 0)],
            req(cores=100),
            FitOptions(),
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
        (
            "cores all taken and none asked",
            [card("a")],
            [CardUse(1, 100, 100)],
            req(cores=0),
            FitOptions(),
            "1/1 CardComputeUnitsExhausted",
        ),
        (
            "too little compute left",
            [card("a")],
            [CardUse(1, 100, 80)],
            req(cores=30),
            FitOptions(),
            "1/1 CardInsufficientCore",
        ),
        (
            "the wrong model",
            [card("a")],
            [CardUse()],
            req(),
            FitOptions(use_types=("A100",)),
            "1/1 CardTypeMismatch",
        ),
        (
            "a model the pod refuses",
            [card("a")],
            [CardUse()],
            req(),
            FitOptions(nouse_types=("t4",)),
            "1/1 CardTypeMismatch",
        ),
        (
            "another card's UUID asked",
            [card("a")],
            [CardUse()],
            req(),
            FitOptions(use_uuids=frozenset({"b"})),
            "1/1 CardUuidMismatch",
        ),
        (
            "a cordoned card",
            [card("a")],
            [CardUse()],
            req(),
            FitOptions(cordoned=frozenset({"a"})),
            "1/1 CardCordoned",
        ),
        (
            "mutex refuses a used card",
            [card("a")],
            [CardUse(1, 10, 0)],
            req(),
            FitOptions(gpu_policy="mutex"),
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
    ],
)
def test_a_node_that_cannot_fit_says_why_in_hamis_words(
    case: str,
    cards: list[Card],
    uses: list[CardUse],
    asked: CardRequest,
    opts: FitOptions,
    reason: str,
) -> None:
    fit = fit_node(cards, uses, [app(asked)], opts)
    assert (fit.grants, fit.reason) == (None, reason), case


def test_a_percentage_takes_that_share_of_the_card_it_lands_on() -> None:
    fit = fit_node([card("a", mem=15360)], [CardUse()], [app(req(mem=0, pct=50))], FitOptions())
    assert fit.grants == [[Grant("a", "NVIDIA", 7680, 0)]]


def test_init_containers_see_the_node_as_it_is_and_app_containers_see_each_other() -> None:
    one_slot = [card("a", count=1)]
    fits = fit_node(one_slot, [CardUse()], [init(req()), app(req()), app(None)], FitOptions())
    assert fits.grants is not None
    assert encode_allocation(fits.grants) == "a,NVIDIA,1000,0:;a,NVIDIA,1000,0:;;"
    second = fit_node(one_slot, [CardUse()], [app(req()), app(req())], FitOptions())
    assert (second.grants, second.reason) == (None, "1/1 CardTimeSlicingExhausted")


def test_cards_of_another_vendor_are_not_considered() -> None:
    fit = fit_node([card("npu", type="Ascend-910")], [CardUse()], [app(req())], FitOptions())
    assert fit.reason == "1/0 NodeInsufficientDevice"


def test_usage_sums_app_containers_and_takes_the_init_peak() -> None:
    cards = [card("a"), card("b")]

    def a(mem: int, cores: int) -> Grant:
        return Grant("a", "NVIDIA", mem, cores)

    pods = [
        # one init container on a (3000), two app containers on a (1000 + 500): the init peak wins
        (1, [[a(3000, 10)], [a(1000, 20)], [a(500, 5)]]),
        # a grant on a card the node does not register is ignored
        (0, [[Grant("gone", "NVIDIA", 999, 9), Grant("b", "NVIDIA", 100, 1)]]),
    ]
    table = one_node(cards)
    for inits, containers in pods:
        table.apply(0, pod_usage(inits, containers))
    uses = table.uses(0)
    assert uses[0] == CardUse(used=2, usedmem=3000, usedcores=25)
    assert uses[1] == CardUse(used=1, usedmem=100, usedcores=1)


def test_a_card_in_mig_mode_takes_no_share() -> None:
    mig = Card("GPU-m", 7, 40960, 100, "NVIDIA-A100", True, mode="mig")
    fit = fit_node([mig], [CardUse()], [app(req())], FitOptions())
    assert fit.grants is None
    assert fit.reason == "1/1 CardMigTopologyInfeasible"
