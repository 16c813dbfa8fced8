"""MetaX GPUs taken whole, the HAMi way (HAMi v2.10.0 ``pkg/device/metax/device.go``).

MetaX's device plugin in GPU mode publishes a node's cards only as the capacity
``metax-tech.com/gpu``, and a container takes whole cards of it. HAMi lists the cards from that
number, so this module does too; its sibling :mod:`caldera.devices.metax_sgpu` is the sGPU dialect
of the same ConfigMap section (``metax``). What is MetaX's own here:

- the cards (``GetNodeDevices``): ``<node>-metax-<i>`` for each of the capacity's cards, each one
  sharing slot, 65536 MiB and 100 % compute, NUMA 0, healthy; a capacity that is not a whole
  number, or 0, is "device not found" (HAMi's own test writes ``Count: 100`` but checks only the
  id, memory and cores: the code's 1 slot is what decides);
- the request (``GenerateResourceRequests``): ``metax-tech.com/gpu`` from limits, else requests,
  a whole number (narrowed to int32 as Go does; 0 or less asks for nothing), always 100 % of the
  memory and 100 % of the cores of each card;
- the fit (``MetaxDevices.Fit``): HAMi's checks in HAMi's order, the cards walked from the end,
  without NUMA, card-type or UUID selectors, cordon or quota (MetaX's ``Fit`` makes none), and
  ``customFilterRule``: every card the pod's earlier containers hold must be this one
  (``CardNotFoundCustomFilterRule``; the walk reads them from ``Given.earlier``);
- the node score (``ScoreNode``): under binpack ``2000 -`` the node's topology loss for the
  pod's card count (``metax-tech.com/gpu.topology.losses``), under spread ``2000 -`` its
  topology score (``metax-tech.com/gpu.topology.scores``), added to HAMi's node score
  (:func:`node_score`, through ``Vendor.score_node``);
- the bind (``PatchAnnotations``): the allocation on ``hami.io/metax-gpu-devices-to-allocate``
  and ``-allocated``; no node lock (``LockNode`` takes none).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence

from caldera.devices.fit import (
    NO_GIVEN,
    CardUse,
    FitOptions,
    Given,
    Walked,
    card_order,
    policy_words,
    share_refusal,
    slot_refusal,
)
from caldera.devices.hami import (
    DEFAULTS,
    GPU_POLICY,
    SCORING_WEIGHTS,
    decode_allocation,
    encode_allocation,
    go_int32,
    named,
    scoring_weights,
)
from caldera.devices.model import Card, CardRequest, DeviceDefaults, Grant, RegistrationError
from caldera.devices.vendor import HAMI_KEYS, NO_LABELS, ScoreInput, Vendor, no_annotation_cards

__all__ = [
    "CARD_CORES",
    "CARD_MEMORY",
    "COUNT",
    "KEYS",
    "LOSS_ANNOTATION",
    "METAX_GPU",
    "SCORE_ANNOTATION",
    "VENDOR",
    "capacity_cards",
    "container_request",
    "custom_filter_rule",
    "node_score",
    "pod_options",
    "topology_value",
    "walk",
]

VENDOR = "Metax-GPU"
"""``MetaxGPUDevice`` and ``MetaxGPUCommonWord``."""
COUNT = "metax-tech.com/gpu"
"""The chart's ``metax.resourceCountName`` (``-metax-name``)."""
CARD_MEMORY = 65536
CARD_CORES = 100
CARD_SLOTS = 1
"""``GetNodeDevices``: every card is 64 GiB, all its compute, one container at a time."""
LOSS_ANNOTATION = "metax-tech.com/gpu.topology.losses"
SCORE_ANNOTATION = "metax-tech.com/gpu.topology.scores"
"""``MetaxAnnotationLoss``/``MetaxAnnotationScore``: per card count, the node's topology loss
and score (a JSON object ``{"1": 0, "2": 110, ...}``) as MetaX's device plugin writes them."""
NODE_SCORE_BASE = 2000.0
BINPACK, SPREAD = "binpack", "spread"
KEYS = dataclasses.replace(
    HAMI_KEYS,
    to_allocate="hami.io/metax-gpu-devices-to-allocate",
    allocated="hami.io/metax-gpu-devices-allocated",
    lock="",
)
"""``InitMetaxDevice``'s ``InRequestDevices``/``SupportDevices``; ``LockNode`` takes no lock."""
CUSTOM_FILTER_RULE = "CardNotFoundCustomFilterRule"


def capacity_cards(
    node: str,
    annotations: Mapping[str, str],
    capacity: Mapping[str, float],
    labels: Mapping[str, str] = NO_LABELS,
) -> list[Card]:
    """``GetNodeDevices``: one card per unit of the node's ``metax-tech.com/gpu`` capacity."""
    del labels  # no node label decides these cards
    del annotations  # MetaX GPUs register nothing on the node
    count = capacity.get(COUNT)
    if count is None or count != int(count) or int(count) == 0:
        raise RegistrationError(f"device not found {COUNT}")
    return [
        Card(
            id=f"{node}-metax-{i}",
            count=CARD_SLOTS,
            devmem=CARD_MEMORY,
            devcore=CARD_CORES,
            type=VENDOR,
            health=True,
            index=i,
            numa=0,
            mode="",
        )
        for i in range(int(count))  # a negative count lists none, as Go's loop does
    ]


def container_request(
    limits: Mapping[str, float],
    requests: Mapping[str, float],
    defaults: DeviceDefaults = DEFAULTS,
) -> CardRequest | None:
    """``GenerateResourceRequests``: whole cards, all of each card's memory and cores. None when
    the count is absent, not a whole number (``AsInt64`` fails) or, narrowed to int32, not
    positive (HAMi's ``Resourcereqs`` drops a request of 0 cards)."""
    del defaults  # MetaX GPUs have no configured default memory or cores
    count = named(COUNT, limits, requests)
    if count is None or count != int(count):
        return None
    nums = go_int32(int(count))
    if nums <= 0:
        return None
    return CardRequest(vendor=VENDOR, nums=nums, memreq=0, mem_percentage=100, coresreq=100)


def pod_options(
    annotations: Mapping[str, str], gpu_policy: str, cordon: frozenset[str] = frozenset()
) -> FitOptions:
    """HAMi's generic GPU policy and scoring weights: MetaX's ``checkUUID`` accepts every card
    and its ``checkType`` names no NUMA binding; there is no cordon."""
    del cordon
    weights = annotations.get(SCORING_WEIGHTS)
    return FitOptions(
        gpu_policy=annotations.get(GPU_POLICY) or gpu_policy,
        weights=scoring_weights(weights) if weights is not None else (1, 1, 1),
    )


def custom_filter_rule(earlier: Sequence[Sequence[Grant]], card: Card) -> bool:
    """``customFilterRule``: every MetaX GPU the pod's earlier containers were given (HAMi's
    ``allocated``: earlier init containers for an init container, earlier app containers for an
    app container) is ``card`` ("Metax needs all devices on a device")."""
    return all(g.uuid == card.id for grants in earlier for g in grants)


def walk(
    cards: Sequence[Card],
    uses: list[CardUse],
    request: CardRequest,
    opts: FitOptions,
    vendor: str,
    given: Given = NO_GIVEN,
) -> Walked:
    """``MetaxDevices.Fit`` for one container: the cards in HAMi's order, walked from the end;
    each card failing counts one reason. ``given.earlier`` is the pod's grants so far for
    :func:`custom_filter_rule`; MetaX's ``Fit`` checks no quota."""
    earlier = [given.earlier]
    reasons: Counter[str] = Counter()
    mutex = "mutex" in policy_words(opts.gpu_policy)
    cores = min(request.coresreq, 100)  # "core limit can't exceed 100"
    nums = request.nums
    taken: list[Grant] = []
    for i in reversed(card_order(cards, uses, request, opts)):
        card, use = cards[i], uses[i]
        if not card.health:
            reasons["CardNotHealth"] += 1
            continue
        if request.vendor != VENDOR:  # checkType
            reasons["CardTypeMismatch"] += 1
            continue
        mem = request.memory_on(card)
        refused = slot_refusal(card, use, mutex) or share_refusal(
            card, use, mem, cores, card.devcore
        )
        if refused:
            reasons[refused] += 1
            continue
        if not custom_filter_rule(earlier, card):
            reasons[CUSTOM_FILTER_RULE] += 1
            continue
        taken.append(Grant(card.id, request.vendor, mem, cores))
        nums -= 1
        if nums == 0:
            return taken, reasons, None
    if taken:
        reasons["AllocatedCardsInsufficientRequest"] = len(taken)
    return None, reasons, None


def topology_value(text: str, cards: int) -> float:
    """``parseMetaxAnnos``: the value for ``cards`` in a ``{"<cards>": <int>}`` object; 0 when
    the text is not such an object (Go's ``json.Unmarshal`` into ``map[int]int`` fails) or has
    no entry for ``cards``."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return 0.0
    if not isinstance(parsed, dict):
        return 0.0
    values: dict[int, int] = {}
    for key, value in parsed.items():
        if not _go_int_key(key) or (value is not None and not _go_int(value)):
            return 0.0  # one bad entry fails the whole Unmarshal
        values[int(key)] = 0 if value is None else value
    return float(values.get(cards, 0))


def _go_int_key(key: str) -> bool:
    """A JSON object key Go's ``strconv.ParseInt(key, 10, 64)`` reads."""
    digits = key[1:] if key[:1] in "+-" and len(key) > 1 else key
    return digits.isascii() and digits.isdigit()


def _go_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def node_score(
    annotations: Mapping[str, str], containers: Sequence[Sequence[Grant]], policy: str
) -> float:
    """``ScoreNode``: what MetaX adds to HAMi's score of a node (``annotations``: the node's)
    that would give the pod ``containers``: binpack prefers the lower topology loss, spread the
    higher topology score (HAMi picks the lowest node score under spread), for the pod's card
    count; 0 when the node has no such annotation or another policy is in force."""
    cards = sum(len(grants) for grants in containers)
    key = {BINPACK: LOSS_ANNOTATION, SPREAD: SCORE_ANNOTATION}.get(policy)
    if key is None or key not in annotations:
        return 0.0
    return NODE_SCORE_BASE - topology_value(annotations[key], cards)


def _score_node(seen: ScoreInput) -> float:
    return node_score(seen.annotations, seen.grants, seen.policy)


METAX_GPU = Vendor(
    name=VENDOR,
    register_annotation="",
    resources=frozenset({COUNT}),
    quota_memory="",
    quota_cores="",
    keys=KEYS,
    count_resource=COUNT,
    read_cards=no_annotation_cards,
    read_request=container_request,
    read_options=pod_options,
    encode=encode_allocation,
    decode=decode_allocation,
    cordon_annotation="",
    walk=walk,
    score_node=_score_node,
    from_capacity=capacity_cards,
    capacity_names=(COUNT,),
    family="metax",
)
"""HAMi's MetaX GPU dialect (whole cards); ``GetResourceNames`` names no memory or core
resource, so no namespace quota applies."""
