"""AMD GPUs the HAMi way: tables after HAMi's ``pkg/device/amd/device_test.go``.

Each table names the Go test it follows and each row its Go case. ``Test_MutateAdmission`` has no
counterpart: Caldera runs no per-vendor admission webhook (its range checks are the request's,
``Test_GenerateResourceRequests``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from caldera.devices.amd import (
    AMD_GPU,
    NO_TYPE,
    AmdRequest,
    amd_request,
    capacity_cards,
    container_request,
    pod_options,
    walk,
)
from caldera.devices.fit import CardUse, FitOptions, fit_node, kind_ok, reason_text
from caldera.devices.model import Card, Grant, NodeView, RegistrationError
from caldera.devices.table import DeviceTable
from caldera.devices.vendors import node_cards

REGISTER = "hami.io/node-amd-register"
ONE_CARD = (
    '[{"id":"GPU-0","index":0,"count":1,"devmem":8192,"devcore":100,"type":"amd",'
    '"numa":0,"health":true}]'
)
"""``Test_GetNodeDevices``' registration."""


def test_get_node_devices_reads_the_json_registration() -> None:
    """``Test_GetNodeDevices``: one card, its id and type as registered."""
    cards = capacity_cards("node-1", {REGISTER: ONE_CARD}, {"amd.com/gpu": 1})
    assert [(c.id, c.type, c.devmem, c.devcore, c.count, c.health) for c in cards] == [
        ("GPU-0", "amd", 8192, 100, 1, True)
    ]


def test_get_node_devices_without_the_annotation_is_an_error() -> None:
    """``Test_GetNodeDevices``, node-2: no ``hami.io/node-amd-register``."""
    with pytest.raises(RegistrationError, match=r"annos not found hami\.io/node-amd-register"):
        capacity_cards("node-2", {}, {"amd.com/gpu": 1})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("[]", "no gpu found on node", id="an empty list: no gpu found on node"),
        pytest.param("null", "no gpu found on node", id="null decodes to no devices"),
        pytest.param("[{", "not valid JSON", id="UnMarshalNodeDevices fails"),
    ],
)
def test_a_registration_without_cards_is_an_error(text: str, message: str) -> None:
    """``GetNodeDevices``: ``len(nodedevices) == 0`` and decode errors."""
    with pytest.raises(RegistrationError, match=message):
        capacity_cards("node-1", {REGISTER: text}, {"amd.com/gpu": 1})


@pytest.mark.parametrize(
    ("capacity", "cards"),
    [
        pytest.param({"amd.com/gpu": 1.0}, ("GPU-0",), id="a whole count: healthy"),
        pytest.param({"amd.com/gpu": 0.0}, (), id="gpuCount == 0: unhealthy"),
        pytest.param({"amd.com/gpu": 1.5}, (), id="AsInt64 fails: unhealthy"),
        pytest.param({}, (), id="no capacity: unhealthy"),
    ],
)
def test_a_node_without_amd_capacity_has_no_cards(
    capacity: dict[str, float], cards: tuple[str, ...]
) -> None:
    """``CheckHealth``: HAMi drops the node's AMD cards (``rmNodeDevices``) unless its capacity
    ``amd.com/gpu`` is a whole number other than 0, whatever the registration says."""
    got = node_cards(AMD_GPU, NodeView("node-1", {REGISTER: ONE_CARD}, capacity))
    assert not isinstance(got, str)
    assert tuple(c.id for c in got) == cards


def test_patch_annotations_writes_the_allocation_under_both_keys() -> None:
    """``Test_PatchAnnotations``: ``EncodePodSingleDevice`` in ``hami.io/amd-devices-to-allocate``
    and ``-allocated``, with HAMi's shared scheduling annotations and nothing else."""
    grants = [[Grant("test1", "AMD", 100, 3), Grant("test2", "AMD", 200, 4)]]
    got = AMD_GPU.bind_annotations("node-1", grants, 1700000000.0)
    encoded = "test1,AMD,100,3:test2,AMD,200,4:;"
    assert got == {
        "hami.io/vgpu-node": "node-1",
        "hami.io/vgpu-time": "1700000000",
        "hami.io/amd-devices-to-allocate": encoded,
        "hami.io/amd-devices-allocated": encoded,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
    }
    assert AMD_GPU.keys.lock == "hami.io/mutex.lock"  # NodeLockAMD


@pytest.mark.parametrize(
    ("annotations", "card_type", "request_type", "found"),
    [
        pytest.param({}, "AMD-MI300X", "AMD", True, id="no selector: found"),
        pytest.param({"amd.com/use-gputype": "MI250"}, "AMD-MI300X", "AMD", False, id="use MI250"),
        pytest.param({}, "AMD-MI300X", "other", False, id="another request type"),
    ],
)
def test_check_type(
    annotations: dict[str, str], card_type: str, request_type: str, found: bool
) -> None:
    """``Test_checkType``: the request must be AMD's and the card's type the pod's."""
    request = AmdRequest(request_type, 1, 0, 100, 1)
    got = kind_ok(card_type, "", request, pod_options(annotations, "spread"), "AMD")
    assert got is found


CHECK_AMD_TYPE = {
    "no annotations": ({}, "MI300X", True),
    "matching use type": ({"amd.com/use-gputype": "MI300"}, "MI300X", True),
    "non-matching use type": ({"amd.com/use-gputype": "MI250"}, "MI300X", False),
    "matching nouse type excludes card": ({"amd.com/nouse-gputype": "MI300"}, "MI300X", False),
    "non-matching nouse type keeps card": ({"amd.com/nouse-gputype": "MI250"}, "MI300X", True),
    "empty nouse annotation keeps card": ({"amd.com/nouse-gputype": ""}, "MI300X", True),
    "empty use annotation keeps card": ({"amd.com/use-gputype": ""}, "MI300X", True),
    "whitespace-only nouse annotation keeps card": (
        {"amd.com/nouse-gputype": "   "},
        "MI300X",
        True,
    ),
    "whitespace-only use annotation keeps card": ({"amd.com/use-gputype": "   "}, "MI300X", True),
    "nouse with trailing comma only excludes named type": (
        {"amd.com/nouse-gputype": "MI250,"},
        "MI300X",
        True,
    ),
    "nouse with leading comma only excludes named type": (
        {"amd.com/nouse-gputype": ",MI250"},
        "MI300X",
        True,
    ),
    "nouse with blank member still excludes named type": (
        {"amd.com/nouse-gputype": " MI250 , "},
        "MI250X",
        False,
    ),
    "nouse with only commas keeps card": ({"amd.com/nouse-gputype": ", "}, "MI300X", True),
    "use with trailing comma matches named type only": (
        {"amd.com/use-gputype": "MI300,"},
        "MI250X",
        False,
    ),
    "use with only commas rejects card": ({"amd.com/use-gputype": ", "}, "MI300X", False),
}


@pytest.mark.parametrize(
    ("annotations", "card_type", "want"), CHECK_AMD_TYPE.values(), ids=CHECK_AMD_TYPE.keys()
)
def test_check_amd_type(annotations: dict[str, str], card_type: str, want: bool) -> None:
    """``TestCheckAMDType``: the pod's card-type selectors, case-insensitive, blank members
    skipped (a use list of blank members only matches nothing)."""
    opts = pod_options(annotations, "spread")
    assert kind_ok(card_type, "", amd_request(1, 0, 100), opts, "AMD") is want


def test_a_use_list_of_blank_members_only_is_a_selector_no_type_matches() -> None:
    """``checkAMDType``: ``", "`` is a use list, one whose members all are skipped."""
    assert pod_options({"amd.com/use-gputype": ", "}, "spread").use_types == (NO_TYPE,)


LIMITS = {"amd.com/gpu": 2.0, "amd.com/gpumem": 4096.0, "amd.com/gpucores": 33.0}

REQUESTS: dict[str, tuple[dict[str, float], dict[str, float], tuple[int, int, int] | None]] = {
    "parses limits only": (LIMITS, dict.fromkeys(LIMITS, 99.0), (2, 4096, 33)),
    "no gpu limits -> empty": (
        {"amd.com/gpumem": 4096.0, "amd.com/gpucores": 33.0},
        {},
        None,
    ),
    "defaults an omitted core limit to 100 percent": (
        {"amd.com/gpu": 1.0, "amd.com/gpumem": 4096.0},
        {},
        (1, 4096, 100),
    ),
    "rejects zero count": ({"amd.com/gpu": 0.0}, {}, None),
    "rejects overflowing count": ({"amd.com/gpu": 2.0**31}, {}, None),
    "rejects negative memory": ({"amd.com/gpu": 1.0, "amd.com/gpumem": -1.0}, {}, None),
    "rejects overflowing memory": ({"amd.com/gpu": 1.0, "amd.com/gpumem": 2.0**31}, {}, None),
    "rejects zero core percentage": ({"amd.com/gpu": 1.0, "amd.com/gpucores": 0.0}, {}, None),
    "rejects excessive core percentage": (
        {"amd.com/gpu": 1.0, "amd.com/gpucores": 101.0},
        {},
        None,
    ),
}


@pytest.mark.parametrize(("limits", "requests", "want"), REQUESTS.values(), ids=REQUESTS.keys())
def test_generate_resource_requests(
    limits: dict[str, float],
    requests: dict[str, float],
    want: tuple[int, int, int] | None,
) -> None:
    """``Test_GenerateResourceRequests`` (the chart's resource names): limits alone, each value
    range-checked; (nums, Memreq, Coresreq) or the empty request."""
    got = container_request(limits, requests)
    assert (None if got is None else (got.nums, got.memreq, got.percent)) == want


def test_a_count_in_requests_only_asks_for_nothing() -> None:
    """``GenerateResourceRequests`` reads ``ctr.Resources.Limits`` alone."""
    assert container_request({}, {"amd.com/gpu": 1.0}) is None


def test_a_fractional_count_asks_for_nothing() -> None:
    """``count.AsInt64()`` fails on ``1.5``: no request."""
    assert container_request({"amd.com/gpu": 1.5}, {}) is None


def test_no_memory_asks_for_the_whole_card_and_the_arrays_check_one_cu() -> None:
    """``Memreq`` 0 takes ``Totalmem`` in ``Fit`` (100 % for the arrays); the arrays check the
    least CU count any share takes."""
    got = container_request({"amd.com/gpu": 1.0}, {})
    assert got == AmdRequest("AMD", 1, 0, 100, 1, percent=100)


@dataclass(frozen=True)
class Usage:
    """One ``DeviceUsage`` as ``TestDevices_Fit`` writes it."""

    id: str
    index: int = 0
    used: int = 0
    count: int = 2
    usedmem: int = 0
    totalmem: int = 1000
    totalcore: int = 100
    usedcores: int = 0
    type: str = "AMD"
    health: bool = True

    def card(self) -> Card:
        return Card(
            self.id, self.count, self.totalmem, self.totalcore, self.type, self.health, self.index
        )

    def use(self) -> CardUse:
        return CardUse(self.used, self.usedmem, self.usedcores)


@dataclass(frozen=True)
class FitCase:
    devices: list[Usage]
    request: tuple[int, int, int]
    """(Nums, Memreq, Coresreq)."""
    chosen: list[tuple[str, str, int, int]] | None
    """(uuid, type written, memory, cores) per card taken."""
    reason: str = ""
    pod: dict[str, str] = field(default_factory=dict)


FIT_CASES = {
    "allocate two whole cards (memreq=0 uses totalmem; coresreq=0 uses totalcore when whole mem)": (
        FitCase(
            [Usage("dev-0"), Usage("dev-1", index=1, count=12)],
            (2, 0, 0),
            [("dev-1", "AMD", 1000, 100), ("dev-0", "AMD", 1000, 100)],
        )
    ),
    "core percentage maps per device": FitCase(
        [Usage("dev-0", totalcore=10), Usage("dev-1", index=1, count=12)],
        (1, 500, 50),
        [("dev-1", "AMD", 500, 50)],
    ),
    "retains the registered product type in the allocation": FitCase(
        [Usage("dev-0", type="AMD_Instinct_MI300X_VF")],
        (1, 100, 10),
        [("dev-0", "AMD_Instinct_MI300X_VF", 100, 10)],
    ),
    "clamps a positive percentage to at least one CU": FitCase(
        [Usage("dev-0", totalcore=64)], (1, 100, 1), [("dev-0", "AMD", 100, 1)]
    ),
    "clamps a core request to the device total": FitCase(
        [Usage("dev-0", totalcore=64)], (1, 100, 101), [("dev-0", "AMD", 100, 64)]
    ),
    "insufficient memory": FitCase(
        [Usage("dev-0", usedmem=900)], (1, 500, 10), None, "1/1 CardInsufficientMemory"
    ),
    "insufficient core": FitCase(
        [Usage("dev-0", totalcore=10, usedcores=9)],
        (1, 100, 100),
        None,
        "1/1 CardInsufficientCore",
    ),
    "uuid mismatch (use)": FitCase(
        [Usage("dev-1")],
        (1, 100, 10),
        None,
        "1/1 CardUuidMismatch",
        pod={"amd.com/use-gpu-uuid": "dev-0"},
    ),
    "time slicing exhausted": FitCase(
        [Usage("dev-0", used=2)], (1, 100, 10), None, "1/1 CardTimeSlicingExhausted"
    ),
    "unhealthy device is rejected": FitCase(
        [Usage("dev-0", health=False)], (1, 100, 10), None, "1/1 CardNotHealth"
    ),
}


def fit(case: FitCase) -> tuple[list[tuple[str, str, int, int]] | None, str]:
    """``AMDDevices.Fit`` of one container: the cards taken, or HAMi's reason."""
    cards = [d.card() for d in case.devices]
    nums, memreq, percent = case.request
    grants, reasons, out_of = walk(
        cards,
        [d.use() for d in case.devices],
        amd_request(nums, memreq, percent),
        pod_options(case.pod, "spread"),
        "AMD",
    )
    if grants is None:
        return None, reason_text(reasons, len(cards) if out_of is None else out_of)
    return [(g.uuid, g.vendor, g.memory, g.cores) for g in grants], ""


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_devices_fit(case: FitCase) -> None:
    """``TestDevices_Fit``. The Go test hands ``Fit`` its list as is; here the walk sorts it
    first, as ``fitInDevices`` does, and the order comes out the same (spread: the card with
    the higher score first, so the last one, walked first, is the emptier)."""
    assert fit(case) == (case.chosen, case.reason)


MI300X = Card("GPU-a0", 4, 196608, 304, "AMD Instinct MI300X VF", True, 0)
"""The registration of ``docs/develop/amd-vgpu.md``, four containers at most."""


@pytest.mark.parametrize(
    ("percent", "cus"),
    [
        pytest.param(25, 76, id="25 percent of 304 CUs"),
        pytest.param(33, 100, id="33 percent: floor(100.32)"),
        pytest.param(67, 203, id="67 percent: floor(203.68)"),
    ],
)
def test_a_percentage_becomes_the_cards_cus(percent: int, cus: int) -> None:
    """``Fit``'s ``dev.Totalcore * k.Coresreq / 100`` (amd-vgpu.md §5.2's examples)."""
    grants, _, _ = walk([MI300X], [CardUse()], amd_request(1, 16384, percent), FitOptions(), "AMD")
    assert grants == [Grant("GPU-a0", "AMD Instinct MI300X VF", 16384, cus)]


def test_a_mutex_pod_refuses_a_card_in_use() -> None:
    """``Fit``'s ``isMutex && dev.Used > 0``."""
    grants, reasons, _ = walk(
        [MI300X],
        [CardUse(1, 1024, 10)],
        amd_request(1, 1024, 10),
        pod_options({"hami.io/gpu-scheduler-policy": "mutex"}, "spread"),
        "AMD",
    )
    assert grants is None
    assert reason_text(reasons, 1) == "1/1 ExclusiveDeviceAllocateConflict"


def test_a_short_node_counts_the_cards_it_found() -> None:
    """``Fit``: ``AllocatedCardsInsufficientRequest`` is the number of cards taken before the
    walk ran out."""
    other = Card("GPU-a1", 4, 196608, 304, "AMD Instinct MI300X VF", True, 1)
    grants, reasons, _ = walk(
        [MI300X, other],
        [CardUse(), CardUse(1, 190000, 0)],
        amd_request(2, 16384, 25),
        FitOptions(),
        "AMD",
    )
    assert grants is None
    assert reason_text(reasons, 2) == (
        "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory"
    )


def test_two_containers_of_one_pod_share_a_card() -> None:
    """``fitInDevices`` per container (``AddResourceUsage`` between them), through
    :func:`fit_node` with the AMD walk; the allocation names the product type."""
    request = container_request(
        {"amd.com/gpu": 1, "amd.com/gpumem": 16384, "amd.com/gpucores": 25}, {}
    )
    got = fit_node(
        [MI300X], [CardUse()], [(False, request), (False, request)], FitOptions(), "AMD", walk
    )
    assert got.grants == [[Grant("GPU-a0", "AMD Instinct MI300X VF", 16384, 76)]] * 2
    annotations = AMD_GPU.bind_annotations("amd-a", got.grants, 0.0)
    assert annotations["hami.io/amd-devices-allocated"] == (
        "GPU-a0,AMD Instinct MI300X VF,16384,76:;GPU-a0,AMD Instinct MI300X VF,16384,76:;"
    )


@pytest.mark.parametrize(
    ("use", "asked", "reason"),
    [
        pytest.param(
            CardUse(),
            amd_request(2, 0, 100),
            "1/1 NodeInsufficientDevice",
            # fitInDevices: k.Nums > len(typeDevices) before Fit
            id="more cards than the node has is NodeInsufficientDevice",
        ),
        pytest.param(
            CardUse(1, 0, 1),
            amd_request(1, 0, 100),
            "1/1 CardInsufficientCore",
            # no amd.com/gpucores: 100 % of the CUs, so a card with any CU taken is refused
            id="a whole card needs every CU free",
        ),
    ],
)
def test_a_one_card_node_refuses_the_pod_with_hamis_reason(
    use: CardUse, asked: AmdRequest, reason: str
) -> None:
    got = fit_node([MI300X], [use], [(False, asked)], FitOptions(), "AMD", walk)
    assert got.grants is None
    assert got.reason == reason


def test_the_arrays_never_refuse_a_card_the_walk_takes() -> None:
    """On a card of fewer than 100 CUs a percentage is fewer CUs than its number: 50 % of 64 CUs
    is 32, and 40 are free. The arrays check 1 CU and let the walk decide (``walk_decides``)."""
    small = Card("GPU-r0", 4, 24576, 64, "AMD Radeon PRO W7800", True, 0)
    request = amd_request(1, 1024, 50)
    opts = pod_options({}, "spread")
    table = DeviceTable("AMD", [[small]], [frozenset()])
    table.apply(0, {"GPU-r0": CardUse(1, 1024, 24)})
    kinds = np.array([kind_ok(m, mode, request, opts, "AMD") for m, mode in table.kinds])
    fits, _ = table.screen(request, opts, table.base(opts, kinds))
    assert fits.tolist() == [True]
    assert AMD_GPU.walk_decides is not None and AMD_GPU.walk_decides(request, opts)
    grants, _, _ = walk([small], table.uses(0), request, opts, "AMD")
    assert grants == [Grant("GPU-r0", "AMD Radeon PRO W7800", 1024, 32)]
