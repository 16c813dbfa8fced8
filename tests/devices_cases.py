"""The shape HAMi's per-vendor ``Fit`` tests share, written once for the vendor test files.

HAMi copies one ``TestDevices_Fit`` table from vendor to vendor (``pkg/device/<vendor>``), and
the vendor files under ``tests/unit`` had copied it after them: the same card and case records,
the same call of the vendor's walk, the same rows. Here are the card (:class:`Gpu`), the case
(:class:`FitCase`), the call (:func:`walk_fit`), the verdict of a walk (:func:`verdict`) and the
rows themselves (:func:`hami_fit_cases` for cards shared by memory and cores,
:func:`whole_card_fit_cases` for cards taken whole). A vendor file keeps only its own rows, and
merges these with them, so every vendor still runs every row it ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from _pytest.mark import ParameterSet

from caldera.devices.fit import CardUse, FitOptions, Given, Quota, Walk, reason_text
from caldera.devices.model import Card, CardRequest, Grant
from caldera.devices.vendor import Vendor

MUTEX = {"hami.io/gpu-scheduler-policy": "mutex"}
"""The pod annotation of HAMi's mutex GPU policy."""

SEVERAL_CARDS = "fit fail: partial allocation AllocatedCardsInsufficientRequest for multiple cards"
"""The Go name of the row asking for more cards than the node has."""

Verdict = tuple[list[str] | None, str]
"""The uuids of the cards chosen (None: none) and HAMi's reason when none are."""


@dataclass(frozen=True)
class Gpu:
    """One card as a ``TestDevices_Fit`` writes its ``DeviceUsage``."""

    uuid: str
    mem: int = 1280
    used: tuple[int, int, int] = (0, 0, 0)
    """(containers, memory, cores) in use."""
    count: int = 100
    health: bool = True
    index: int | None = None
    """The card's index; None: its place in the case's list."""
    core: int = 100
    """``Totalcore``."""


@dataclass(frozen=True)
class FitCase:
    """One row of a ``TestDevices_Fit``: the node's cards, one container's request, the cards
    chosen (None: none) and HAMi's reason when none are."""

    gpus: list[Gpu]
    request: tuple[int, int, int, int]
    """(nums, memreq, memory percentage, coresreq)."""
    chosen: list[str] | None
    reason: str = ""
    pod: dict[str, str] = field(default_factory=dict)
    word: str | None = None
    """The request's type (``checkType`` compares it with the vendor's); None: the vendor's."""
    quota: Quota | None = None
    """The namespace quota, in place of the vendor's pod options' (their GPU policy kept)."""
    earlier: tuple[Grant, ...] = ()
    """The cards the pod's earlier containers hold (HAMi's ``allocated``)."""


def verdict(grants: Sequence[Grant] | None, reasons: Counter[str], out_of: int) -> Verdict:
    """A walk's outcome as the Go tests compare it: the uuids chosen and no reason, or no cards
    and HAMi's reason (``GenReason`` out of ``out_of`` cards)."""
    if grants is None:
        return None, reason_text(reasons, out_of)
    return [g.uuid for g in grants], ""


def case_cards(case: FitCase, word: str) -> list[Card]:
    """The case's cards, registered with the vendor's type ``word``."""
    return [
        Card(g.uuid, g.count, g.mem, g.core, word, g.health, i if g.index is None else g.index)
        for i, g in enumerate(case.gpus)
    ]


def case_uses(case: FitCase) -> list[CardUse]:
    """What the case's cards have in use."""
    return [CardUse(*g.used) for g in case.gpus]


def case_request(case: FitCase, word: str) -> CardRequest:
    """The case's container request, typed ``word`` unless the case names another type."""
    nums, mem, percentage, cores = case.request
    return CardRequest(word if case.word is None else case.word, nums, mem, percentage, cores)


def case_options(case: FitCase, vendor: Vendor) -> FitOptions:
    """The vendor's options for the case's pod (spread, nothing cordoned), with its quota."""
    opts = vendor.read_options(case.pod, "spread", frozenset())
    if case.quota is not None:
        opts = FitOptions(gpu_policy=opts.gpu_policy, quota=case.quota)
    return opts


def walk_fit(case: FitCase, *, vendor: Vendor, word: str, walk: Walk) -> Verdict:
    """``<Vendor>Devices.Fit`` of one container, as the Go test calls it (before
    ``fitInDevices``): ``walk`` over the case's cards; the reason is out of the cards the walk
    says it counted, or all of them."""
    cards = case_cards(case, word)
    got = walk(
        cards,
        case_uses(case),
        case_request(case, word),
        case_options(case, vendor),
        word,
        Given(earlier=case.earlier),
    )
    grants, reasons, out_of = got
    return verdict(grants, reasons, len(cards) if out_of is None else out_of)


def hami_fit_cases(
    *, use_uuid: str = "", nouse_uuid: str = "", several_cards: bool = False
) -> dict[str, FitCase]:
    """The rows of HAMi's ``TestDevices_Fit`` for cards shared by memory and cores (Moore
    Threads, MetaX, Cambricon), by their Go names: with the vendor's use- and no-use-uuid
    annotations when it has them, and the several-cards row when its Go test has it."""
    cases = {
        "fit success": FitCase([Gpu("dev-0", 128), Gpu("dev-1", 128)], (1, 64, 0, 50), ["dev-1"]),
        "fit fail: memory not enough": FitCase(
            [Gpu("dev-0", 128)], (1, 512, 0, 50), None, "1/1 CardInsufficientMemory"
        ),
        "fit fail: core not enough": FitCase(
            [Gpu("dev-0", 1024, (0, 0, 100))], (1, 512, 0, 50), None, "1/1 CardInsufficientCore"
        ),
        "fit fail: type mismatch": FitCase(
            [Gpu("dev-0", 128)], (1, 512, 0, 50), None, "1/1 CardTypeMismatch", word="OtherType"
        ),
        "fit fail: card overused": FitCase(
            [Gpu("dev-0", used=(100, 0, 0))],
            (1, 512, 0, 50),
            None,
            "1/1 CardTimeSlicingExhausted",
        ),
        "fit success: but core limit can't exceed 100": FitCase(
            [Gpu("dev-0")], (1, 512, 0, 120), ["dev-0"]
        ),
        "fit fail:  card exclusively": FitCase(
            [Gpu("dev-0", used=(20, 0, 0))],
            (1, 512, 0, 100),
            None,
            "1/1 ExclusiveDeviceAllocateConflict",
        ),
        "fit fail:  CardComputeUnitsExhausted": FitCase(
            [Gpu("dev-0", used=(20, 0, 100))],
            (1, 512, 0, 0),
            None,
            "1/1 CardComputeUnitsExhausted",
        ),
        "fit fail:  AllocatedCardsInsufficientRequest": FitCase(
            [Gpu("dev-0", used=(20, 0, 10))],
            (2, 512, 0, 20),
            None,
            "1/1 AllocatedCardsInsufficientRequest",
        ),
        "fit success:  memory percentage": FitCase(
            [Gpu("dev-0", used=(20, 0, 10))], (1, 0, 10, 20), ["dev-0"]
        ),
        "mutex policy rejects used device": FitCase(
            [Gpu("dev-0", 128, (1, 0, 0))],
            (1, 64, 0, 50),
            None,
            "1/1 ExclusiveDeviceAllocateConflict",
            pod=MUTEX,
        ),
        "fit fail: CardNotHealth": FitCase(
            [Gpu("dev-0", health=False)], (1, 512, 0, 50), None, "1/1 CardNotHealth"
        ),
    }
    if use_uuid:
        cases["fit fail: user assign use uuid mismatch"] = FitCase(
            [Gpu("dev-1")], (2, 512, 0, 50), None, "1/1 CardUuidMismatch", pod={use_uuid: "dev-0"}
        )
    if nouse_uuid:
        cases["fit fail: user assign no use uuid match"] = FitCase(
            [Gpu("dev-0")],
            (2, 512, 0, 50),
            None,
            "1/1 CardUuidMismatch",
            pod={nouse_uuid: "dev-0"},
        )
    if several_cards:
        cases[SEVERAL_CARDS] = FitCase(
            [Gpu("dev-0"), Gpu("dev-1")],
            (3, 512, 0, 20),
            None,
            "2/2 AllocatedCardsInsufficientRequest",
        )
    return cases


def whole(uuid: str, *, used: int = 0, count: int = 1, health: bool = True) -> Gpu:
    """A card taken whole, as the Biren and Vastai tests write it: one slot, no memory, no
    cores; ``used`` containers on it."""
    return Gpu(uuid, 0, (used, 0, 0), count, health, core=0)


def whole_card_fit_cases(
    *, use_uuid: str, nouse_uuid: str, several_cards_row: str
) -> dict[str, FitCase]:
    """The rows of HAMi's ``TestDevices_Fit`` for cards taken whole (Biren, Vastai), by their Go
    names: the vendor's use- and no-use-uuid annotations, and its name for the several-cards
    row."""
    return {
        "fit success": FitCase([whole("dev-0"), whole("dev-1")], (1, 0, 0, 0), ["dev-1"]),
        "fit fail: type mismatch": FitCase(
            [whole("dev-0")], (1, 512, 0, 50), None, "1/1 CardTypeMismatch", word="OtherType"
        ),
        "fit fail: user assign use uuid mismatch": FitCase(
            [whole("dev-1")], (1, 0, 0, 0), None, "1/1 CardUuidMismatch", pod={use_uuid: "dev-0"}
        ),
        "fit fail: user assign no use uuid match": FitCase(
            [whole("dev-0")],
            (1, 0, 0, 0),
            None,
            "1/1 CardUuidMismatch",
            pod={nouse_uuid: "dev-0"},
        ),
        "fit fail: card overused": FitCase(
            [whole("dev-0", used=1)], (1, 0, 0, 0), None, "1/1 CardTimeSlicingExhausted"
        ),
        "fit fail:  AllocatedCardsInsufficientRequest": FitCase(
            [whole("dev-0")], (2, 0, 0, 0), None, "1/1 AllocatedCardsInsufficientRequest"
        ),
        "mutex policy rejects used device": FitCase(
            [whole("dev-0", used=1, count=2)],
            (1, 0, 0, 0),
            None,
            "1/1 ExclusiveDeviceAllocateConflict",
            pod=MUTEX,
        ),
        several_cards_row: FitCase(
            [Gpu("dev-0", 1280, core=100), Gpu("dev-1", 1280, core=100)],
            (3, 512, 0, 20),
            None,
            "2/2 AllocatedCardsInsufficientRequest",
        ),
        "fit fail: CardNotHealth": FitCase(
            [whole("dev-0", health=False)], (1, 0, 0, 0), None, "1/1 CardNotHealth"
        ),
    }


def whole_card_request_cases(*, count: str, word: str) -> list[ParameterSet]:
    """The rows of ``Test_GenerateResourceRequests`` for cards taken whole (Biren, Vastai), as
    ``(limits, requests, expected)``: the count resource ``count`` read from the limits, else the
    requests, as whole cards typed ``word`` (no memory: percentage 100; no cores)."""
    one = CardRequest(word, 1, 0, 100, 0)
    return [
        pytest.param({}, {}, None, id="don't set to limits and request"),
        pytest.param({count: 1}, {count: 1}, one, id="set to limits and request"),
        pytest.param({count: 1}, {}, one, id="only set to limits"),
        pytest.param({}, {count: 1}, one, id="only set to request"),
    ]
