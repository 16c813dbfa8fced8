"""Vastai accelerators the HAMi way (HAMi's ``pkg/device/vastai/device.go``), whole cards or dies.

HAMi's Vastai device is its Biren device (:mod:`caldera.devices.biren`) with other names, plus a
*die mode*: Vastai's device plugin may register each die of a physical card (an AIC) as a device
of its own, saying so in the device's ``custominfo`` (``DeviceStrategy: "die"``, ``AIC: "<card
id>"``). This module follows HAMi's ``master`` of August 2026 (commit 4707fb0):

- the registration ``hami.io/node-va-register`` (``GetNodeDevices``): HAMi's JSON only, every card
  100 % compute, none at all "no gpu found on node"; the ``custominfo`` keys ``DeviceStrategy``
  and ``AIC`` are kept (:class:`DieCard`); a ``custominfo`` that is not an object fails the
  registration, as Go's decoder fails it;
- the request (``GenerateResourceRequests``): the chart's ``vastaiResourceName``
  (``vastaitech.com/va``), a whole number of cards, no memory, no cores;
- the walk (``VastaiDevices.Fit``): Biren's checks in Biren's order (UUID selectors
  ``vastaitech.com/use-gpuuuid`` / ``nouse-gpuuuid``). In die mode (``isDieMode``: the *first*
  card of HAMi's sorted order says ``DeviceStrategy: die``) every passing die is collected, and
  then: as many as asked, all of them; more, and one asked, the first met; more, and several
  asked, the AICs holding the most passing dies first (``computeBestCombination``). Under the
  ``mutex`` policy in die mode an idle die whose AIC has a die in use is refused
  (``ExclusiveDeviceAllocateConflict``): a physical card is exclusive;
- the bind (``PatchAnnotations``): the allocation with the vendor word ``Vastai`` on
  ``hami.io/Vastai-devices-to-allocate`` and ``-allocated``; HAMi's node lock
  ``hami.io/mutex.lock``.

The node score (``ScoreNode``) rewards a pod whose dies sit on one AIC: :func:`die_score`, which
the deviceshare plugin does not call yet (it scores a node by its usage alone).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from caldera.devices.biren import (
    allocation_keys,
    card_refusal,
    json_cards,
    options_reader,
    request_reader,
)
from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walked,
    card_order,
    policy_words,
)
from caldera.devices.hami import decode_allocation, encode_allocation
from caldera.devices.model import Card, CardRequest, Grant, RegistrationError
from caldera.devices.vendor import ScoreInput, Vendor

__all__ = [
    "COUNT",
    "DIE_STRATEGY",
    "KEYS",
    "REGISTER_ANNOTATION",
    "VASTAI",
    "VENDOR",
    "DieCard",
    "best_combination",
    "die_score",
    "registered_cards",
    "walk",
]

VENDOR = "Vastai"
"""``VastaiDevice`` and ``VastaiCommonWord``."""
REGISTER_ANNOTATION = "hami.io/node-va-register"
COUNT = "vastaitech.com/va"
"""The chart's ``vastaiResourceName`` (``resourceCountName`` of the ConfigMap's ``vastai``)."""
USE_UUID, NOUSE_UUID = "vastaitech.com/use-gpuuuid", "vastaitech.com/nouse-gpuuuid"
FAMILY = "vastai"
KEYS = allocation_keys(VENDOR)
STRATEGY_KEY, AIC_KEY = "DeviceStrategy", "AIC"
"""The ``custominfo`` keys HAMi reads (Go map keys: case-sensitive)."""
DIE_STRATEGY = "die"


@dataclass(frozen=True, slots=True)
class DieCard(Card):
    """A Vastai device with what its ``custominfo`` says (HAMi's ``CustomInfo`` map)."""

    custom_info: bool = False
    """The registration gave a ``custominfo`` object (Go: a non-nil map)."""
    strategy: str | None = None
    """``DeviceStrategy`` when a string (``die``: the device is one die of an AIC)."""
    aic: str | None = None
    """``AIC`` when a string: the physical card the die is on."""
    aic_given: bool = False
    """``AIC`` is present, whatever its JSON type (``ScoreNode`` tells the two apart)."""


def _custom(card: Card, fields: Mapping[str, Any]) -> Card:
    info = fields.get("custominfo")
    if info is None:
        return card
    if not isinstance(info, dict):
        raise RegistrationError(f"{card.id}: custominfo: expected an object, got {info!r}")
    strategy, aic = info.get(STRATEGY_KEY), info.get(AIC_KEY)
    base = {f.name: getattr(card, f.name) for f in dataclasses.fields(Card)}
    return DieCard(
        **base,
        custom_info=True,
        strategy=strategy if isinstance(strategy, str) else None,
        aic=aic if isinstance(aic, str) else None,
        aic_given=AIC_KEY in info,
    )


def registered_cards(text: str) -> list[Card]:
    """``GetNodeDevices``: the devices on ``hami.io/node-va-register``, with their die info."""
    return json_cards(text, _custom)


def _strategy(card: Card) -> str | None:
    return card.strategy if isinstance(card, DieCard) else None


def _aic(card: Card) -> str | None:
    """``aicID``: the AIC a die is on, when its ``custominfo`` names one as a string."""
    return card.aic if isinstance(card, DieCard) else None


def walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``VastaiDevices.Fit`` for one container: Biren's walk, or in die mode every passing die
    collected and the best of them chosen. ``given`` is unused: no quota is checked."""
    del given
    reasons: Counter[str] = Counter()
    order = card_order(cards, uses, request, opts)
    die_mode = bool(order) and _strategy(cards[order[0]]) == DIE_STRATEGY  # isDieMode
    mutex = "mutex" in policy_words(opts.gpu_policy)
    occupied: set[str] = set()
    if mutex and die_mode:  # a die in use takes its whole AIC
        held = (_aic(c) for c, u in zip(cards, uses, strict=True) if u.used > 0)
        occupied = {a for a in held if a is not None}
    wanted = request.nums
    taken: list[tuple[Card, Grant]] = []
    for i in reversed(order):
        card = cards[i]
        refused = card_refusal(card, uses[i], request, opts, vendor, mutex)
        if refused is None and _aic(card) in occupied:
            refused = "ExclusiveDeviceAllocateConflict"
        if refused:
            reasons[refused] += 1
            continue
        taken.append((card, Grant(card.id, request.vendor, 0, request.coresreq)))
        if not die_mode and len(taken) == wanted:
            return [g for _, g in taken], reasons, None
    if die_mode and len(taken) == wanted:
        return [g for _, g in taken], reasons, None
    if die_mode and len(taken) > wanted:
        if wanted == 1:
            return [taken[0][1]], reasons, None
        return best_combination(taken, wanted), reasons, None
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] = len(taken)
    return None, reasons, None


def best_combination(taken: Sequence[tuple[Card, Grant]], wanted: int) -> list[Grant]:
    """``computeBestCombination``: the dies grouped by AIC, the AICs with the most dies first
    (a stable sort; ties in the order the walk met the AICs, where Go's map order is random),
    each taken whole until ``wanted``. A die naming no AIC is never chosen, so fewer than
    ``wanted`` may come back (HAMi's ``Fit`` still says it fits)."""
    by_aic: dict[str, list[Grant]] = {}
    for card, grant in taken:
        aic = _aic(card)
        if aic is not None:
            by_aic.setdefault(aic, []).append(grant)
    out: list[Grant] = []
    for grants in sorted(by_aic.values(), key=len, reverse=True):
        for grant in grants:
            out.append(grant)
            if len(out) == wanted:
                return out
    return out


def _score_node(seen: ScoreInput) -> float:
    return die_score(seen.cards, seen.grants)


def die_score(cards: Sequence[Card], containers: Sequence[Sequence[Grant]]) -> float:
    """``VastaiDevices.ScoreNode``: per container holding dies, the share of them on its most
    used AIC, summed (1 per container whose dies share one AIC); 0 for the whole pod as soon
    as a device has no ``custominfo``, a ``DeviceStrategy`` other than ``die``, or no ``AIC``.
    HAMi adds it to the node's usage score unweighted, whatever the node policy."""
    by_id = {c.id: c for c in cards}
    score = 0.0
    for grants in containers:
        counts: Counter[str] = Counter()
        for grant in grants:
            card = by_id.get(grant.uuid)
            if not isinstance(card, DieCard) or not card.custom_info:
                return 0.0
            if card.strategy is not None and card.strategy != DIE_STRATEGY:
                return 0.0
            if not card.aic_given:
                return 0.0
            if card.aic is not None:
                counts[card.aic] += 1
        total = sum(counts.values())
        if total:
            score += max(counts.values()) / total
    return score


def _mutex(request: CardRequest, opts: FitOptions) -> bool:
    """Under the mutex policy a die may be refused for its AIC, which only the walk sees."""
    del request
    return "mutex" in policy_words(opts.gpu_policy)


VASTAI = Vendor(
    name=VENDOR,
    register_annotation=REGISTER_ANNOTATION,
    resources=frozenset({COUNT}),
    quota_memory="",
    quota_cores="",
    keys=KEYS,
    count_resource=COUNT,
    read_cards=registered_cards,
    read_request=request_reader(COUNT, VENDOR),
    read_options=options_reader(USE_UUID, NOUSE_UUID),
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    walk=walk,
    walk_decides=_mutex,
    score_node=_score_node,
    family=FAMILY,
)
"""HAMi's Vastai dialect: whole cards or dies, no memory or compute split, no quota."""
