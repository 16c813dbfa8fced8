"""MetaX sGPUs the HAMi way: tables after HAMi's ``pkg/device/metax/`` ``sdevice_test.go``,
``protocol_test.go`` and ``qos_test.go``.

Each test names the Go test it follows; each row is named by its Go case (Go's ``#01`` marks a
repeated name). Not carried over: ``TestPodMetaxSDeviceString`` (a log line),
``TestMetaxSDevices_AddResourceUsage`` (it exercises ``MetaxDevices``, the whole-GPU dialect:
``tests/unit/test_metax_device.py``) and the webhook's "no sgpu resource" and single-device rows
(Caldera has no webhook; options are read only for pods asking for sGPUs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest

from caldera.devices.fit import NO_GIVEN, CardUse, fit_node, reason_text
from caldera.devices.metax_colocation import (
    APP_CLASS,
    BEST_EFFORT,
    BURST_SHARE,
    FIXED_SHARE,
    OFFLINE,
    ONLINE,
    PREDICATE_TIME,
    QOS_POLICY,
    Holder,
    app_class_fits,
    card_holders,
    device_qos,
    prioritize_online,
    qos_fits,
    score_online,
)
from caldera.devices.metax_links import LinkDevice, prioritize_exclusive, score_exclusive
from caldera.devices.metax_sgpu import (
    ALLOCATED,
    METAX_SGPU,
    REGISTER_ANNOTATION,
    TOPOLOGY_AWARE,
    VENDOR,
    SgpuCard,
    SgpuOptions,
    container_request,
    node_score,
    pod_options,
    registered_cards,
    topology_aware_enabled,
    walk,
)
from caldera.devices.model import Card, CardRequest, Grant, NodeView
from caldera.devices.vendors import VENDORS, node_cards

COUNT, CORES, MEMORY = "metax-tech.com/sgpu", "metax-tech.com/vcore", "metax-tech.com/vmemory"
USE_UUID, NOUSE_UUID = "metax-tech.com/use-gpuuuid", "metax-tech.com/nouse-gpuuuid"
GI, MI = 2**30, 2**20


def _holder(app_class: str = "", qos: str = BEST_EFFORT, cores: int = 10, since: int = 0) -> Holder:
    return Holder(app_class, qos, cores, since)


PLAIN, ON, OFF = _holder(), _holder(ONLINE, ""), _holder(OFFLINE)

# -- MutateAdmission: what the webhook denies, and its default -------------------------------------

QOS_ERROR = f"{QOS_POLICY} must be set one of [best-effort, fixed-share, burst-share]"
APP_CLASS_ERROR = f"{APP_CLASS} must be set one of [online, offline]"


@pytest.mark.parametrize(
    ("pod", "error", "qos"),
    [
        ({QOS_POLICY: "best-effortx"}, QOS_ERROR, ""),
        ({}, "", BEST_EFFORT),
        ({QOS_POLICY: BURST_SHARE}, "", BURST_SHARE),
        ({APP_CLASS: "oNLine"}, APP_CLASS_ERROR, ""),
        ({APP_CLASS: OFFLINE, QOS_POLICY: "best-effortx"}, QOS_ERROR, ""),
        ({APP_CLASS: ONLINE, QOS_POLICY: "best-effortx"}, "", "best-effortx"),
    ],
    ids=[
        "qos policy error",
        "no qos policy",
        "qos policy fit",
        "app class task verify error",
        "offline task with qos",
        "online task with qos",
    ],
)
def test_mutate_admission(pod: dict[str, str], error: str, qos: str) -> None:
    """``TestMutateAdmission``: the pods HAMi's webhook denies are refused with its message; a
    pod naming no QoS policy has the ``best-effort`` it writes ("pod annotation nil" too)."""
    if error:
        with pytest.raises(ValueError, match=re.escape(error)):
            pod_options(pod, "spread")
        return
    opts = pod_options(pod, "spread")
    assert isinstance(opts, SgpuOptions) and opts.qos == qos


def test_pod_options_read_the_selectors_the_app_class_and_the_topology_wish() -> None:
    """``CheckUUID`` with MetaX's keys; ``sgpu-topology-aware`` read as ``strconv.ParseBool``."""
    opts = pod_options(
        {USE_UUID: "a, b", NOUSE_UUID: "c", APP_CLASS: ONLINE, TOPOLOGY_AWARE: "T"}, "binpack"
    )
    assert isinstance(opts, SgpuOptions)
    assert (opts.use_uuids, opts.nouse_uuids) == (frozenset({"a", "b"}), frozenset({"c"}))
    assert (opts.app_class, opts.topology_aware, opts.gpu_policy) == (ONLINE, True, "binpack")
    assert opts.soft_split  # the arrays' sieve leaves an online pod's cores to the walk
    unreadable = pod_options({TOPOLOGY_AWARE: "yes"}, "spread")
    assert isinstance(unreadable, SgpuOptions) and unreadable.topology_aware is None


# -- GenerateResourceRequests ----------------------------------------------------------------------


def _request(nums: int, memreq: int, percentage: int, cores: int) -> CardRequest:
    return CardRequest(VENDOR, nums, memreq, percentage, cores)


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({COUNT: 1}, _request(1, 0, 100, 100)),
        ({COUNT: 2}, _request(2, 0, 100, 100)),
        ({COUNT: 1, CORES: 30}, _request(1, 0, 100, 30)),
        ({COUNT: 1, MEMORY: 16}, _request(1, 16 * 1024, 0, 100)),
        ({COUNT: 1, CORES: 60, MEMORY: 16}, _request(1, 16 * 1024, 0, 60)),
        ({COUNT: 1, CORES: 60, MEMORY: 1024 * MI}, _request(1, 1024, 0, 60)),
        ({COUNT: 1, CORES: 60, MEMORY: 16 * GI}, _request(1, 16 * 1024, 0, 60)),
        ({COUNT: 1, MEMORY: 2100001}, None),
        ({COUNT: 2200000000}, None),
        ({COUNT: 1, CORES: 2200000000}, None),
        ({COUNT: 1, MEMORY: 1000}, _request(1, 0, 100, 100)),
        ({COUNT: 1, MEMORY: 1.5, CORES: 0.5}, _request(1, 0, 100, 100)),
        ({COUNT: 1, MEMORY: -1}, None),
        ({COUNT: 0.5}, None),
    ],
    ids=[
        "one full sgpu test",
        "two full sgpu test",
        "one sgpu test set vcore",
        "one sgpu test set vmemory",
        "one sgpu test set vcore&vmemory",
        "one sgpu test set vcore&vmemory, mem unit Mi",
        "one sgpu test set vcore&vmemory, mem unit Gi",
        "oversized memory request exceeds int32 range (no unit, pre-multiply guard)",
        "oversized sgpu count exceeds int32 range",
        "oversized vcore exceeds int32 range",
        "1000 is written 1k: bytes, 0 MiB, the whole card's memory",
        "memory and cores that are not whole numbers are not read",
        "negative memory",
        "a count that is not a whole number",
    ],
)
def test_generate_resource_requests(limits: dict[str, float], expected: CardRequest | None) -> None:
    """``TestGenerateResourceRequests``: limits only; vmemory in GiB without a unit, in bytes
    with one."""
    assert container_request(limits, {}) == expected


def test_a_count_named_only_in_requests_asks_for_nothing() -> None:
    """``GenerateResourceRequests`` reads ``ctr.Resources.Limits`` alone."""
    assert container_request({}, {COUNT: 1}) is None


# -- getMetaxSDevices and convertMetaxSDeviceToHAMIDevice ------------------------------------------

NORMAL = (
    '[{"uuid": "GPU-123", "model": "sgpu", "totalDevCount": 16, "totalCompute": 100, '
    '"bdf": "0000:44:00.0", "totalVRam" : 32768, "numa": 1, "healthy": true, '
    '"qosPolicy": "fixed-share"}]'
)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            {REGISTER_ANNOTATION: NORMAL},
            (
                SgpuCard(
                    "GPU-123",
                    16,
                    32768,
                    100,
                    VENDOR,
                    True,
                    0,
                    1,
                    mode="",
                    qos_policy=FIXED_SHARE,
                    model="sgpu",
                ),
            ),
        ),
        ({}, ()),
        ({REGISTER_ANNOTATION: ""}, "not valid JSON"),
        ({REGISTER_ANNOTATION: "[]"}, "no sdevice found on node"),
    ],
    ids=[
        "test normal node",
        "test annotations nil",
        "test Unmarshal fail",
        "test devices len 0",
    ],
)
def test_get_metax_sdevices(annotations: dict[str, str], expected: tuple[Card, ...] | str) -> None:
    """``TestGetMetaxSDevices``, through the vendor seam (an error is the registration's)."""
    got = node_cards(METAX_SGPU, NodeView("normal", annotations))
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got
    else:
        assert got == expected


def test_convert_metax_sdevice_to_hami_device() -> None:
    """``TestConvertMetaxSDeviceToHAMIDevice``: the index is the position, the QoS policy, model
    and MetaLink zone kept."""
    text = json.dumps(
        [
            {
                "uuid": "GPU-a16ac188-0592-5c8f-2b6e-8bd8e7a604a9",
                "bdf": "0000:0a:00.0",
                "model": "native",
                "totalDevCount": 16,
                "totalCompute": 100,
                "totalVRam": 64 * 1024,
                "availableDevCount": 6,
                "availableCompute": 50,
                "availableVRam": 32 * 1024,
                "numa": 0,
                "healthy": True,
                "qosPolicy": BEST_EFFORT,
                "linkZone": 1,
            },
            {
                "uuid": "GPU-a16ac188-0592-5c8f-2b6e-8bd8e7a604a8",
                "bdf": "0000:09:00.0",
                "model": "sgpu",
                "totalDevCount": 8,
                "totalCompute": 100,
                "totalVRam": 32 * 1024,
                "numa": -1,
                "healthy": False,
                "qosPolicy": BURST_SHARE,
                "linkZone": 2,
            },
        ]
    )
    assert registered_cards(text) == [
        SgpuCard(
            "GPU-a16ac188-0592-5c8f-2b6e-8bd8e7a604a9",
            16,
            64 * 1024,
            100,
            VENDOR,
            True,
            0,
            0,
            mode="",
            qos_policy=BEST_EFFORT,
            model="native",
            link_zone=1,
        ),
        SgpuCard(
            "GPU-a16ac188-0592-5c8f-2b6e-8bd8e7a604a8",
            8,
            32 * 1024,
            100,
            VENDOR,
            False,
            1,
            -1,
            mode="",
            qos_policy=BURST_SHARE,
            model="sgpu",
            link_zone=2,
        ),
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[{"uuid": "a", "totalVRam": "32768"}]', "expected an int32"),
        ('[{"uuid": "a", "totalVRam": 4294967296}]', "expected an int32"),
        ('[{"uuid": "a", "healthy": "true"}]', "expected true or false"),
        ("[null]", "expected an object"),
        ('{"uuid": "a"}', "expected a JSON array"),
    ],
    ids=["a number as a string", "beyond int32", "health as a string", "a null card", "no list"],
)
def test_a_registration_go_cannot_decode_lists_no_card(text: str, error: str) -> None:
    """``getMetaxSDevices``: ``json.Unmarshal`` fails, so does the whole registration."""
    got = node_cards(METAX_SGPU, NodeView("n1", {REGISTER_ANNOTATION: text}))
    assert isinstance(got, str) and error in got


def test_keys_are_matched_without_case_and_null_leaves_a_field_unset() -> None:
    """Go's decoder: ``TotalVRam`` fills ``totalVRam``; ``null`` leaves the zero value."""
    cards = registered_cards('[{"UUID": "a", "TotalVRam": 1024, "numa": null, "extra": 1}]')
    assert [(c.id, c.devmem, c.numa, c.health) for c in cards] == [("a", 1024, 0, False)]
    assert METAX_SGPU in VENDORS and METAX_SGPU.family == "metax"


# -- checkDeviceQos, addJitteryQos, JitteryQosCache ------------------------------------------------


@pytest.mark.parametrize(
    ("used", "cores", "registered", "expected"),
    [
        (0, 50, BURST_SHARE, True),
        (2, 100, BURST_SHARE, True),
        (2, 50, BURST_SHARE, False),
        (2, 50, BEST_EFFORT, True),
        (2, 50, "", True),
    ],
    ids=[
        "check no use device",
        "check request exclusive",
        "check fail",
        "check pass",
        "a card with no policy takes any",
    ],
)
def test_check_device_qos(used: int, cores: int, registered: str, expected: bool) -> None:
    """``TestCheckDeviceQos``: a best-effort request on a card of ``registered`` policy."""
    assert qos_fits(BEST_EFFORT, used, cores, device_qos(registered, [])) is expected


def test_add_jittery_qos() -> None:
    """``TestAddJitteryQos``: a best-effort pod on GPU-123 (50 cores, already best-effort),
    GPU-456 (50 cores, burst-share) and GPU-789 (a whole card): the cards read as switched to
    best-effort, best-effort and no policy until their device plugin reports it."""
    pod = {QOS_POLICY: BEST_EFFORT, PREDICATE_TIME: "5"}
    grants = [
        [Grant("GPU-123", VENDOR, 0, 50), Grant("GPU-456", VENDOR, 0, 50)],
        [Grant("GPU-789", VENDOR, 0, 100)],
    ]
    holders = card_holders([(pod, grants)])
    registered = {"GPU-123": BEST_EFFORT, "GPU-456": BURST_SHARE, "GPU-789": BEST_EFFORT}
    got = {uuid: device_qos(qos, holders[uuid]) for uuid, qos in registered.items()}
    assert got == {"GPU-123": BEST_EFFORT, "GPU-456": BEST_EFFORT, "GPU-789": ""}


@pytest.mark.parametrize(
    ("cached", "expected"),
    [
        (
            {"GPU-123": FIXED_SHARE, "GPU-789": BURST_SHARE},
            {"GPU-123": FIXED_SHARE, "GPU-456": BEST_EFFORT, "GPU-789": BURST_SHARE},
        ),
        (
            {"GPU-123": BEST_EFFORT, "GPU-789": BURST_SHARE},
            {"GPU-123": BEST_EFFORT, "GPU-456": BEST_EFFORT, "GPU-789": BURST_SHARE},
        ),
        (
            {"GPU-123": BEST_EFFORT, "GPU-789": BEST_EFFORT},
            {"GPU-123": BEST_EFFORT, "GPU-456": BEST_EFFORT, "GPU-789": BEST_EFFORT},
        ),
    ],
    ids=["no sync", "sync sccuess", "sync sccuess#01"],
)
def test_jittery_qos_cache_sync(cached: dict[str, str], expected: dict[str, str]) -> None:
    """``TestJitteryQosCacheSync`` and ``TestGet``: every card reports best-effort; a card whose
    latest share expects another policy reads as that one until the report matches."""
    holders = {uuid: [_holder(qos=qos, cores=50, since=1)] for uuid, qos in cached.items()}
    got = {uuid: device_qos(BEST_EFFORT, holders.get(uuid, [])) for uuid in expected}
    assert got == expected


def test_the_latest_share_decides_and_online_shares_switch_nothing() -> None:
    """``addJitteryQos`` keeps one expectation per card, the last; online pods add none."""
    holders = [_holder(qos=FIXED_SHARE, since=2), _holder(qos=BURST_SHARE, since=1), ON]
    assert device_qos(BEST_EFFORT, holders) == FIXED_SHARE
    assert device_qos(BEST_EFFORT, [ON]) == BEST_EFFORT
    assert device_qos(BEST_EFFORT, [], placed=BURST_SHARE) == BURST_SHARE


# -- checkAppClass ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_class", "used", "holders", "expected"),
    [
        (ONLINE, 0, [], True),
        ("", 1, [ON], False),
        ("", 1, [OFF], False),
        ("", 1, [PLAIN], True),
        (ONLINE, 1, [PLAIN], False),
        (ONLINE, 2, [ON, OFF], True),
        (OFFLINE, 2, [ON, OFF], False),
    ],
    ids=[
        "idle device fit",
        "normal task unfit online device",
        "normal task unfit offline device",
        "normal task fit normal device",
        "online task unfit normal device",
        "online task fit online/offline device",
        "offline task unfit online device",
    ],
)
def test_check_app_class(
    request_class: str, used: int, holders: list[Holder], expected: bool
) -> None:
    """``TestCheckAppClass``."""
    assert app_class_fits(request_class, used, holders) is expected


# -- Fit -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sgpu:
    """One card as ``TestMetaxSDevices_Fit`` writes its ``DeviceUsage``."""

    uuid: str
    mem: int = 1280
    used: tuple[int, int, int] = (0, 0, 0)
    """(containers, memory, cores) in use."""
    health: bool = True
    pods: tuple[Holder, ...] = ()
    qos: str = ""
    zone: int = 0


@dataclass(frozen=True)
class FitCase:
    cards: list[Sgpu]
    request: tuple[int, int, int, int]
    """(nums, memreq, memory percentage, coresreq)."""
    chosen: list[str] | None
    reason: str = ""
    pod: dict[str, str] = field(default_factory=dict)
    word: str = VENDOR
    cores: int | None = None
    """The cores each grant holds, when not the request's."""


TWO = [Sgpu("dev-0", 128), Sgpu("dev-1", 128)]

FIT_CASES = {
    "fit success": FitCase(TWO, (1, 64, 0, 50), ["dev-1"]),
    "fit fail: memory not enough": FitCase(
        [Sgpu("dev-0", 128)], (1, 512, 0, 50), None, "1/1 CardInsufficientMemory"
    ),
    "fit fail: core not enough": FitCase(
        [Sgpu("dev-0", 1024, (0, 0, 100))], (1, 512, 0, 50), None, "1/1 CardInsufficientCore"
    ),
    "fit fail: type mismatch": FitCase(
        [Sgpu("dev-0", 128)], (1, 512, 0, 50), None, "1/1 CardTypeMismatch", word="OtherType"
    ),
    "fit fail: online task, app class unfit": FitCase(
        [Sgpu("dev-0", 128, (1, 64, 10), pods=(PLAIN,))],
        (1, 512, 0, 50),
        None,
        "1/1 CardAppClassMismatch",
        pod={APP_CLASS: ONLINE},
    ),
    "fit fail: normal task, app class unfit": FitCase(
        [Sgpu("dev-0", 128, (1, 64, 10), pods=(ON,))],
        (1, 512, 0, 50),
        None,
        "1/1 CardAppClassMismatch",
    ),
    "fit fail: device unhealthy": FitCase(
        [Sgpu("dev-0", 128, health=False)], (1, 512, 0, 50), None, "1/1 CardUnhealthy"
    ),
    "fit fail: card overused": FitCase(
        [Sgpu("dev-0", used=(100, 0, 0))], (1, 512, 0, 50), None, "1/1 CardTimeSlicingExhausted"
    ),
    "fit success: but core limit can't exceed 100": FitCase(
        [Sgpu("dev-0")], (1, 512, 0, 120), None, "1/1 CardInsufficientCore"
    ),
    "fit fail:  card exclusively": FitCase(
        [Sgpu("dev-0", used=(20, 0, 0))],
        (1, 512, 0, 100),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
    ),
    "fit fail: user assign use uuid mismatch": FitCase(
        [Sgpu("dev-1")], (2, 512, 0, 50), None, "1/1 CardUuidMismatch", pod={USE_UUID: "dev-0"}
    ),
    "fit fail: user assign no use uuid match": FitCase(
        [Sgpu("dev-0")], (2, 512, 0, 50), None, "1/1 CardUuidMismatch", pod={NOUSE_UUID: "dev-0"}
    ),
    "fit fail:  CardComputeUnitsExhausted": FitCase(
        [Sgpu("dev-0", used=(20, 0, 100))], (1, 512, 0, 0), None, "1/1 CardComputeUnitsExhausted"
    ),
    "fit fail:  AllocatedCardsInsufficientRequest": FitCase(
        [Sgpu("dev-0", used=(20, 0, 10))],
        (2, 512, 0, 20),
        None,
        "1/1 AllocatedCardsInsufficientRequest",
    ),
    "fit success:  memory percentage": FitCase(
        [Sgpu("dev-0", used=(20, 0, 10))], (1, 0, 10, 20), ["dev-0"]
    ),
    "mutex policy rejects used device": FitCase(
        [Sgpu("dev-0", 128, (1, 0, 0))],
        (1, 64, 0, 50),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
        pod={"hami.io/gpu-scheduler-policy": "mutex"},
    ),
    # checkDeviceQos in the walk
    "a share on a used card of another policy is refused": FitCase(
        [Sgpu("dev-0", used=(1, 64, 10), qos=BURST_SHARE)],
        (1, 64, 0, 50),
        None,
        "1/1 CardQosPolicyMismatch",
    ),
    "a share waits for the policy the card is switching to": FitCase(
        [Sgpu("dev-0", used=(1, 64, 10), qos=BEST_EFFORT, pods=(_holder(qos=FIXED_SHARE),))],
        (1, 64, 0, 50),
        None,
        "1/1 CardQosPolicyMismatch",
    ),
    "an online pod is not held to the card's policy or cores": FitCase(
        [Sgpu("dev-0", used=(1, 64, 100), qos=BURST_SHARE, pods=(OFF,))],
        (1, 64, 0, 50),
        ["dev-0"],
        pod={APP_CLASS: ONLINE},
        cores=0,
    ),
    # prioritizeOnlineDevices and prioritizeExclusiveDevices after the walk
    "an online pod gets the card with the fewest online pods": FitCase(
        [
            Sgpu("dev-0", used=(2, 0, 0), pods=(ON, OFF)),
            Sgpu("dev-1", used=(2, 0, 0), pods=(ON, ON)),
        ],
        (1, 64, 0, 50),
        ["dev-0"],
        pod={APP_CLASS: ONLINE},
        cores=0,
    ),
    "an offline pod gets the first card found": FitCase(
        [
            Sgpu("dev-0", used=(1, 0, 0), pods=(OFF,)),
            Sgpu("dev-1", used=(2, 0, 0), pods=(OFF, OFF)),
        ],
        (1, 64, 0, 50),
        ["dev-1"],
        pod={APP_CLASS: OFFLINE, "hami.io/gpu-scheduler-policy": "binpack"},
    ),
    "an offline pod is kept off cards running online work": FitCase(
        [Sgpu("dev-0", used=(2, 0, 0), pods=(ON, OFF))],
        (1, 64, 0, 50),
        None,
        "1/1 CardAppClassMismatch",
        pod={APP_CLASS: OFFLINE},
    ),
    "whole cards come from the smallest MetaLink zone that holds them": FitCase(
        [Sgpu("c0", zone=1), Sgpu("c1", zone=2), Sgpu("c2", zone=1), Sgpu("c3", zone=3)],
        (2, 0, 100, 100),
        ["c2", "c0"],
    ),
}


def _cards(case: FitCase) -> list[Card]:
    return [
        SgpuCard(s.uuid, 100, s.mem, 100, VENDOR, s.health, i, qos_policy=s.qos, link_zone=s.zone)
        for i, s in enumerate(case.cards)
    ]


def fit(case: FitCase) -> tuple[list[str] | None, str]:
    """``MetaxSDevices.Fit`` of one container: the cards chosen (None: none), HAMi's reason."""
    cards = _cards(case)
    nums, mem, percentage, cores = case.request
    request = CardRequest(case.word, nums, mem, percentage, cores)
    opts = METAX_SGPU.read_options(case.pod, "spread", frozenset())
    uses = [CardUse(*s.used) for s in case.cards]
    holders = {s.uuid: list(s.pods) for s in case.cards}
    grants, reasons, _ = walk(cards, uses, request, opts, VENDOR, NO_GIVEN, holders)
    if grants is None:
        return None, reason_text(reasons, len(cards))
    held = cores if case.cores is None else case.cores
    assert {g.cores for g in grants} == {held}
    return [g.uuid for g in grants], ""


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_metax_sdevices_fit(case: FitCase) -> None:
    """``TestMetaxSDevices_Fit``, with the app class, QoS and prioritising steps of ``Fit``."""
    assert fit(case) == (case.chosen, case.reason)


def test_the_pods_earlier_container_switches_the_cards_policy() -> None:
    """``AddResourceUsage``: once the pod's first container took a share of a card, the card
    runs the pod's policy for its next container (the card reports burst-share)."""
    cards: list[Card] = [SgpuCard("dev-0", 100, 1280, 100, VENDOR, True, qos_policy=BURST_SHARE)]
    request = container_request({COUNT: 1, CORES: 20}, {})
    assert request is not None
    opts = pod_options({}, "spread")
    placed = [Grant("dev-0", VENDOR, 1280 // 2, 20)]
    fitted, _, _ = walk(cards, [CardUse(1, 0, 20)], request, opts, VENDOR, NO_GIVEN, None, placed)
    refused, why, _ = walk(cards, [CardUse(1, 0, 20)], request, opts, VENDOR)
    assert fitted is not None and refused is None and why == {"CardQosPolicyMismatch": 1}


def test_fit_node_shares_the_last_card_by_memory_and_cores() -> None:
    """``Fit`` through the seam: a registration of two cards, a 16 GiB and 60-core share."""
    text = json.dumps(
        [
            {"uuid": f"GPU-{i}", "totalDevCount": 16, "totalCompute": 100, "totalVRam": 32768}
            | {"healthy": True, "qosPolicy": BEST_EFFORT}
            for i in range(2)
        ]
    )
    cards = registered_cards(text)
    request = container_request({COUNT: 1, CORES: 60, MEMORY: 16}, {})
    opts = pod_options({}, "spread")
    got = fit_node(cards, [CardUse(), CardUse()], [(False, request)], opts, VENDOR, walk)
    assert got.grants == [[Grant("GPU-1", VENDOR, 16384, 60)]]
    bad = fit_node(cards, [CardUse(16, 0, 0)] * 2, [(False, request)], opts, VENDOR, walk)
    assert bad.reason == "2/2 CardTimeSlicingExhausted"


# -- prioritizeExclusiveDevices, prioritizeOnlineDevices -------------------------------------------


def _links(*zones: tuple[int, int]) -> list[LinkDevice]:
    return [LinkDevice(f"GPU-{n}", zone) for n, zone in zones]


@pytest.mark.parametrize(
    ("candidates", "require", "expected"),
    [
        (_links((1, 1), (2, 1), (5, 2)), 1, _links((5, 2))),
        (_links((1, 1), (2, 1), (5, 2), (6, 2), (7, 2)), 2, _links((1, 1), (2, 1))),
        (
            _links((1, 1), (2, 1), (5, 2), (6, 2), (7, 2), (8, 2)),
            4,
            _links((5, 2), (6, 2), (7, 2), (8, 2)),
        ),
        (
            _links((1, 1), (2, 1), (5, 2), (6, 2), (7, 2)),
            4,
            _links((1, 1), (2, 1), (5, 2), (6, 2)),
        ),
        (_links((5, 0), (6, 0), (7, 0)), 2, _links((5, 0), (6, 0))),
        (_links((3, 0), (4, 0), (7, 1), (8, 1)), 2, _links((7, 1), (8, 1))),
        (
            _links((3, 0), (4, 0), (6, 1), (7, 1), (8, 1)),
            4,
            _links((6, 1), (7, 1), (8, 1), (3, 0)),
        ),
    ],
    ids=[
        "require one device",
        "require two device",
        "require four device, best result",
        "require four device, general result",
        "no metalink, require two device",
        "part metalink, require two device, best result",
        "part metalink, require four device, bad result",
    ],
)
def test_prioritize_exclusive_devices(
    candidates: list[LinkDevice], require: int, expected: list[LinkDevice]
) -> None:
    """``TestPrioritizeExclusiveDevices``."""
    assert prioritize_exclusive(candidates, require) == expected


@pytest.mark.parametrize(
    ("cards", "expected"),
    [
        (
            {
                "GPU-1": [],
                "GPU-2": [ON],
                "GPU-3": [ON, ON],
                "GPU-4": [ON, OFF],
                "GPU-5": [ON, ON, OFF],
                "GPU-6": [OFF],
                "GPU-7": [OFF, OFF],
            },
            "GPU-1",
        ),
        (
            {"GPU-1": [ON], "GPU-2": [ON, ON], "GPU-3": [ON, ON, ON, OFF], "GPU-4": [OFF, OFF]},
            "GPU-1",
        ),
        (
            {
                "GPU-1": [ON, ON, ON],
                "GPU-2": [ON, OFF],
                "GPU-3": [ON, ON, OFF],
                "GPU-4": [OFF],
                "GPU-5": [OFF, OFF],
            },
            "GPU-2",
        ),
        ({"GPU-1": [OFF], "GPU-2": [OFF, OFF]}, "GPU-1"),
    ],
    ids=[
        "prioritize idle device",
        "prioritize onlyOnline device",
        "prioritize online&offline device",
        "prioritize onlyOffline device",
    ],
)
def test_prioritize_online_devices(cards: dict[str, list[Holder]], expected: str) -> None:
    """``TestPrioritizeOnlineDevices``: one card of the candidates."""
    assert prioritize_online(list(cards), 1, cards) == [expected]


# -- ScoreNode -------------------------------------------------------------------------------------


def _whole(*names: str) -> list[list[Grant]]:
    return [[Grant(name, VENDOR, 0, 100) for name in names]]


@pytest.mark.parametrize(
    ("taken", "previous", "expected"),
    [
        (_links((4, 1)), [(1, 1, 1), (2, 1, 1), (3, 1, 1), (4, 0, 1)], 0),
        (_links((4, 1)), [(1, 0, 1), (2, 0, 1), (3, 0, 1), (4, 0, 1)], -30),
        (_links((3, 1), (4, 1)), [(1, 0, 1), (2, 0, 1), (3, 0, 1), (4, 0, 1)], 60),
        (
            _links((4, 1), (5, 2)),
            [(n, 0 if n in (4, 5) else 1, 1 if n <= 4 else 2) for n in range(1, 9)],
            0,
        ),
        (
            _links((1, 1), (2, 1), (3, 1), (4, 1)),
            [(1, 0, 1), (2, 0, 1), (3, 0, 1), (4, 0, 1), (5, 0, 2)],
            600,
        ),
        (
            _links((3, 1), (4, 1), (5, 2), (6, 2)),
            [(2, 0, 1), (3, 0, 1), (4, 0, 1), (5, 0, 2), (6, 0, 2)],
            180,
        ),
        (
            _links((1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (6, 2), (7, 2), (8, 2)),
            [(n, 0, 1 if n <= 4 else 2) for n in range(1, 9)],
            1200,
        ),
    ],
    ids=[
        "allocate one device, rest zero device",
        "allocate one device, rest three device",
        "allocate two device, best result",
        "allocate two device, bad result",
        "allocate four device, best result",
        "allocate four device, bad result",
        "allocate eight device",
    ],
)
def test_score_exclusive_devices(
    taken: list[LinkDevice], previous: list[tuple[int, int, int]], expected: int
) -> None:
    """``TestScoreExclusiveDevices``: ``previous`` is (GPU number, used, MetaLink zone)."""
    idle = [LinkDevice(f"GPU-{n}", zone) for n, used, zone in previous if used == 0]
    assert score_exclusive(taken, idle) == expected


@pytest.mark.parametrize(
    ("containers", "annotation", "expected"),
    [
        (_whole("a"), "true", True),
        (_whole("a"), "false", False),
        ([[Grant("a", VENDOR, 0, 99)]], "true", False),
        ([[Grant("a", VENDOR, 0, 99)], [Grant("b", VENDOR, 0, 100)]], "true", True),
    ],
    ids=[
        "enable, allocate 100core",
        "disable, allocate 100core",
        "enable, allocate 99core",
        "enable, container[0]: 99core, container[1]: 100core",
    ],
)
def test_need_score(containers: list[list[Grant]], annotation: str, expected: bool) -> None:
    """``TestNeedScore`` (``topologyAwareEnable``)."""
    opts = pod_options({TOPOLOGY_AWARE: annotation}, "spread")
    assert isinstance(opts, SgpuOptions)
    assert topology_aware_enabled(containers, opts, configured=False) is expected


def test_the_configured_topology_awareness_applies_when_the_pod_names_none() -> None:
    """``topologyAwareEnable``: ``MetaxTopologyAware`` (``sgpuTopologyAware``) by default."""
    opts = pod_options({}, "spread")
    assert isinstance(opts, SgpuOptions)
    assert topology_aware_enabled(_whole("a"), opts, configured=True)
    assert not topology_aware_enabled(_whole("a"), opts, configured=False)


@pytest.mark.parametrize(
    ("holders", "expected"),
    [([], 0), ([ON, ON], -40), ([OFF, OFF], -200), ([OFF, OFF, ON, ON], -44)],
    ids=[
        "test idle device",
        "test only online device",
        "test only offline device",
        "test online/offline device",
    ],
)
def test_score_online_devices(holders: list[Holder], expected: int) -> None:
    """``TestScoreOnlineDevices``: the pod takes GPU-123."""
    assert score_online([[Grant("GPU-123", VENDOR, 0, 0)]], {"GPU-123": holders}) == expected


def _previous(*zones: int) -> list[tuple[Card, CardUse]]:
    return [
        (SgpuCard(f"GPU-{i + 1}", 16, 1024, 100, VENDOR, True, i, link_zone=zone), CardUse())
        for i, zone in enumerate(zones)
    ]


@pytest.mark.parametrize(
    ("pod", "containers", "previous", "raw"),
    [
        ({TOPOLOGY_AWARE: "true"}, _whole("GPU-3", "GPU-4"), _previous(1, 1, 1, 1), 60),
        ({APP_CLASS: ONLINE}, [[Grant("GPU-1", VENDOR, 0, 0)]], _previous(0, 0), 0),
        ({}, [[Grant("GPU-1", VENDOR, 0, 50)]], _previous(0), 0),
    ],
    ids=[
        "topology-aware exclusive allocation",
        "online allocation",
        "no topology or online hint scores zero",
    ],
)
def test_score_node_policy_independence(
    pod: dict[str, str],
    containers: list[list[Grant]],
    previous: list[tuple[Card, CardUse]],
    raw: int,
) -> None:
    """``TestScoreNodePolicyIndependence`` and ``TestMetaxSDevicesImplementsPolicyNeutralScorer``:
    one score whatever the policy, weighted by ``OverrideScore`` (10000, negated under spread)."""
    opts = pod_options(pod, "spread")
    binpack = node_score(opts, containers, previous, {}, "binpack")
    assert binpack == 10000.0 * raw
    assert node_score(opts, containers, previous, {}, "spread") == -binpack
    assert node_score(opts, containers, previous, {}, "") == binpack


def test_an_online_pod_scores_the_offline_work_on_its_card() -> None:
    """``ScoreNode``: ``scoreOnlineDevices`` for an online pod (before topology awareness)."""
    opts = pod_options({APP_CLASS: ONLINE, TOPOLOGY_AWARE: "true"}, "spread")
    holders = {"GPU-1": [OFF]}
    got = node_score(opts, [[Grant("GPU-1", VENDOR, 0, 0)]], _previous(0), holders, "binpack")
    assert got == -100 * 10000.0


# -- PatchAnnotations ------------------------------------------------------------------------------


def test_convert_hami_pod_device_to_metax_pod_device() -> None:
    """``TestConvertHAMIPodDeviceToMetaxPodDevice`` as ``PatchAnnotations`` writes it: per
    container, per card, ``uuid``, ``compute``, ``vRam``."""
    prefix = "GPU-a16ac188-0592-5c8f-2b6e-8bd8e7a604a"
    containers = [
        [Grant(f"{prefix}0", VENDOR, 10, 50), Grant(f"{prefix}1", VENDOR, 1024, 30)],
        [Grant(f"{prefix}3", VENDOR, 10 * 1024, 20), Grant(f"{prefix}7", VENDOR, 64 * 1024, 80)],
    ]
    got = METAX_SGPU.bind_annotations("n1", containers, 1_800_000_000.0)
    assert json.loads(got[ALLOCATED]) == [
        [
            {"uuid": f"{prefix}0", "compute": 50, "vRam": 10},
            {"uuid": f"{prefix}1", "compute": 30, "vRam": 1024},
        ],
        [
            {"uuid": f"{prefix}3", "compute": 20, "vRam": 10240},
            {"uuid": f"{prefix}7", "compute": 80, "vRam": 65536},
        ],
    ]


def test_patch_annotations_writes_hamis_and_metaxs_keys() -> None:
    """``PatchAnnotations``: the allocation on ``hami.io/metax-sgpu-devices-*``, the MetaX JSON
    (zeros left out, empty containers kept, Go's compact form) and the time in nanoseconds."""
    containers = [[], [Grant("GPU-1", VENDOR, 4096, 0)]]
    got = METAX_SGPU.bind_annotations("n1", containers, 1_800_000_000.25)
    allocation = ";GPU-1,Metax-SGPU,4096,0:;"
    assert got == {
        "hami.io/vgpu-node": "n1",
        "hami.io/vgpu-time": "1800000000",
        "hami.io/metax-sgpu-devices-to-allocate": allocation,
        "hami.io/metax-sgpu-devices-allocated": allocation,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1800000000",
        ALLOCATED: '[[],[{"uuid":"GPU-1","vRam":4096}]]',
        PREDICATE_TIME: "1800000000250000000",
    }
    assert set(got) == set(METAX_SGPU.written)


def test_lock_node_takes_hamis_mutex_lock_and_the_quota_counts_gib() -> None:
    """``LockNode``: ``MetaxNodeLock`` is ``hami.io/mutex.lock``; ``GetResourceNames``:
    vmemory and vcore with ``MemoryFactor`` 1024."""
    assert METAX_SGPU.keys.lock == "hami.io/mutex.lock"
    assert (METAX_SGPU.quota_memory, METAX_SGPU.quota_cores) == (MEMORY, CORES)
    assert METAX_SGPU.memory_factor == 1024
