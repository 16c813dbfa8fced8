"""Biren GPUs the HAMi way: tables after HAMi's ``pkg/device/biren/device_test.go``.

Each test names the Go test it follows; each row is named by its Go case. ``TestDevices_Fit``
calls ``BirenDevices.Fit`` directly, so its rows run the vendor's walk; the rows HAMi's
``fitInDevices`` would reach also run through :func:`~caldera.devices.fit.fit_node`.
"""

from __future__ import annotations

import json

import pytest

from caldera.devices.biren import (
    BIREN,
    COUNT,
    NO_GPU,
    REGISTER_ANNOTATION,
    card_refusal,
    registered_cards,
)
from caldera.devices.fit import NO_GIVEN, CardUse, FitOptions, fit_node, pod_usage
from caldera.devices.hami import DEFAULTS
from caldera.devices.model import Card, CardRequest, Grant, NodeView, RegistrationError
from caldera.devices.vendors import FAMILIES, VENDORS, enabled_vendors, node_cards
from devices_cases import (
    SEVERAL_CARDS,
    FitCase,
    case_cards,
    case_options,
    case_request,
    case_uses,
    verdict,
    whole_card_fit_cases,
    whole_card_request_cases,
)

WORD = "Biren"


def test_get_node_devices_reads_hamis_json_and_gives_every_card_full_compute() -> None:
    """``Test_GetNodeDevices`` "exist biren device": ``Devcore`` is set to 100, the rest as
    registered (no index, NUMA or mode given: 0, 0, "")."""
    text = (
        '[{"id":"7-0","count":1,"devmem":32768,"type":"Biren","health":true,"devicepairscore":{}}]'
    )
    assert registered_cards(text) == [
        Card("7-0", 1, 32768, 100, "Biren", True, index=0, numa=0, mode="")
    ]


def test_a_node_without_the_annotation_has_no_biren_card() -> None:
    """``Test_GetNodeDevices`` "no annotation": HAMi says "annos not found" and skips the node;
    here the node simply has no Biren cards."""
    assert node_cards(BIREN, NodeView("n1", {})) == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (":", "not valid JSON"),
        ("", "not valid JSON"),
        ("[]", NO_GPU),
        ("null", NO_GPU),
        ('{"id":"7-0"}', "expected a JSON array"),
    ],
    ids=[
        "no biren device",
        "node annotations not decode successfully",
        "an empty list is no gpu found on node",
        "Go's null is no gpu found on node",
        "an object is not a list of devices",
    ],
)
def test_get_node_devices_refuses_what_go_refuses(text: str, says: str) -> None:
    """``Test_GetNodeDevices``: the colon form is not read (``UnMarshalNodeDevices`` is JSON);
    a registration with no card is "no gpu found on node"."""
    with pytest.raises(RegistrationError, match=says):
        registered_cards(text)
    got = node_cards(BIREN, NodeView("n1", {REGISTER_ANNOTATION: text}))
    assert isinstance(got, str) and says in got


def _request(nums: int) -> CardRequest:
    return CardRequest(WORD, nums, 0, 100, 0)


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        *whole_card_request_cases(count=COUNT, word=WORD),
        pytest.param({COUNT: 3}, {COUNT: 1}, _request(3), id="limits are read before requests"),
        pytest.param(
            {COUNT: 0},
            {COUNT: 2},
            None,
            id="a count of zero asks for nothing (Resourcereqs keeps Nums > 0)",
        ),
        pytest.param({COUNT: -1}, {}, None, id="a negative count asks for nothing"),
        pytest.param({COUNT: 1.5}, {}, None, id="a fraction is not AsInt64's"),
        pytest.param(
            {COUNT: 2**32 + 2}, {}, _request(2), id="int32 keeps the low 32 bits of the count"
        ),
    ],
)
def test_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], expected: CardRequest | None
) -> None:
    """``Test_GenerateResourceRequests``: whole cards, no memory (percentage 100), no cores."""
    assert BIREN.read_request(limits, requests, DEFAULTS) == expected


@pytest.mark.parametrize(
    ("word", "refused"),
    [(WORD, None), ("test", "CardTypeMismatch")],
    ids=["the same type", "the different type"],
)
def test_check_type_compares_the_requests_type_alone(word: str, refused: str | None) -> None:
    """``Test_checkType``: a card of type ``Biren`` suits a ``Biren`` request only."""
    card = Card("dev-0", 1, 0, 100, WORD, True)
    request = CardRequest(word, 1, 0, 100, 0)
    assert card_refusal(card, CardUse(), request, FitOptions(), WORD, False) == refused


FIT_CASES = whole_card_fit_cases(
    use_uuid="birentech.com/use-gpuuuid",
    nouse_uuid="birentech.com/nouse-gpuuuid",
    several_cards_row=SEVERAL_CARDS,
)


def _node(case: FitCase) -> tuple[list[Card], list[CardUse], CardRequest, FitOptions]:
    return (
        case_cards(case, WORD),
        case_uses(case),
        case_request(case, WORD),
        case_options(case, BIREN),
    )


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_devices_fit(case: FitCase) -> None:
    """``TestDevices_Fit``: ``BirenDevices.Fit`` of one container, the cards chosen and the
    reason."""
    cards, uses, request, opts = _node(case)
    assert BIREN.walk is not None
    grants, reasons, out_of = BIREN.walk(cards, uses, request, opts, WORD, NO_GIVEN)
    assert out_of is None
    assert verdict(grants, reasons, len(cards)) == (case.chosen, case.reason)


REACHED = {k: c for k, c in FIT_CASES.items() if c.request[0] <= len(c.gpus)}


@pytest.mark.parametrize("case", REACHED.values(), ids=REACHED.keys())
def test_the_node_fit_gives_the_walks_verdict(case: FitCase) -> None:
    """``fitInDevices`` then ``TestDevices_Fit``: through ``fit_node`` with the vendor's walk."""
    cards, uses, request, opts = _node(case)
    got = fit_node(cards, uses, [(False, request)], opts, WORD, BIREN.walk)
    chosen = None if got.grants is None else [g.uuid for g in got.grants[0]]
    assert (chosen, got.reason) == (case.chosen, case.reason)


def test_a_node_with_fewer_cards_than_asked_is_refused_before_the_walk() -> None:
    """``fitInDevices``: ``NodeInsufficientDevice`` when ``Nums`` exceeds the node's cards."""
    case = FIT_CASES["fit fail:  AllocatedCardsInsufficientRequest"]
    cards, uses, request, opts = _node(case)
    got = fit_node(cards, uses, [(False, request)], opts, WORD, BIREN.walk)
    assert (got.grants, got.reason) == (None, "1/1 NodeInsufficientDevice")


def test_a_granted_card_is_charged_one_slot_and_nothing_else() -> None:
    """``Fit`` sets no ``Usedmem`` and ``Usedcores = Coresreq`` (0); ``AddResourceUsage`` then
    adds one use (``TestDevices_AddResourceUsage``: used 1 becomes 2)."""
    cards = [Card("dev-0", 4, 32768, 100, WORD, True)]
    got = fit_node(cards, [CardUse(1)], [(False, _request(1))], FitOptions(), WORD, BIREN.walk)
    assert got.grants == [[Grant("dev-0", WORD, 0, 0)]]
    before = CardUse(1)
    added = pod_usage(0, got.grants)["dev-0"]
    assert (before.used + added.used, added.usedmem, added.usedcores) == (2, 0, 0)


def test_app_containers_take_distinct_slots_of_the_node() -> None:
    """``fitInDevices``: each container's cards count for the next (``AddResourceUsage``)."""
    cards = [Card("a", 1, 0, 100, WORD, True, 0), Card("b", 1, 0, 100, WORD, True, 1)]
    requests = [(False, _request(1)), (False, _request(1))]
    got = fit_node(cards, [CardUse(), CardUse()], requests, FitOptions(), WORD, BIREN.walk)
    assert got.grants == [[Grant("b", WORD, 0, 0)], [Grant("a", WORD, 0, 0)]]


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        ([[Grant("test1", WORD, 2048, 1)]], "test1,Biren,2048,1:;"),
        (
            [[], [Grant("7-0", WORD, 0, 0), Grant("7-1", WORD, 0, 0)]],
            ";7-0,Biren,0,0:7-1,Biren,0,0:;",
        ),
    ],
    ids=["exist device", "a container without a card keeps its place"],
)
def test_patch_annotations(containers: list[list[Grant]], expected: str) -> None:
    """``Test_PatchAnnotations``: ``EncodePodSingleDevice`` on ``hami.io/Biren-devices-to-allocate``
    and ``hami.io/Biren-devices-allocated``, beside HAMi's shared bind keys."""
    got = BIREN.bind_annotations("n1", containers, 1_800_000_000.0)
    assert got["hami.io/Biren-devices-to-allocate"] == expected
    assert got["hami.io/Biren-devices-allocated"] == expected
    assert got["hami.io/vgpu-node"] == "n1"
    assert set(got) == set(BIREN.written)


def test_patch_annotations_no_device() -> None:
    """``Test_PatchAnnotations`` "no device": a pod asking no Biren card has no Biren request,
    so nothing of Biren's is written for it."""
    assert BIREN.read_request({"cpu": 1}, {}, DEFAULTS) is None
    assert BIREN.more_annotations is None


def test_the_node_lock_is_hamis_shared_lock() -> None:
    """``TestDevices_LockNode`` / ``ReleaseNodeLock``: ``nodelock.NodeLockKey``, HAMi's value
    (``time,namespace,pod``) and the configured expiry."""
    assert BIREN.keys.lock == "hami.io/mutex.lock"
    assert not BIREN.bare_lock and BIREN.lock_expiry is None


def test_a_container_limiting_the_count_is_birens() -> None:
    """``Test_MutateAdmission`` "set to resource limits": ``birentech.com/gpu`` is the vendor's
    resource, kept out of the generic resource fit."""
    assert enabled_vendors(frozenset({COUNT})) == (BIREN,)


def test_biren_is_an_opt_in_family_of_hamis_device_configmap() -> None:
    """The ConfigMap's ``biren`` section: shared only when ``deviceshare.Vendors`` names it."""
    assert BIREN in VENDORS and "biren" in FAMILIES and BIREN.family == "biren"


def test_a_card_registered_without_health_is_unhealthy() -> None:
    """``UnMarshalNodeDevices``: ``health`` left out is Go's zero value, false."""
    cards = [
        {"id": "7-0", "count": 2, "devmem": 32768, "type": "Biren-BR104", "health": True},
        {"id": "7-9", "count": 2, "devmem": 32768, "type": "Biren-BR104"},
    ]
    got = node_cards(BIREN, NodeView("n1", {REGISTER_ANNOTATION: json.dumps(cards)}))
    assert isinstance(got, tuple)
    assert [(c.id, c.devcore, c.health) for c in got] == [("7-0", 100, True), ("7-9", 100, False)]
