"""Enflame GCUs the HAMi way: tables after HAMi's ``pkg/device/enflame`` tests.

``device_test.go``, ``device_corebudget_test.go``, ``drs_reconstruction_test.go`` and
``config_test.go`` for the DRS dialect (:mod:`caldera.devices.enflame`,
:mod:`caldera.devices.enflame_drs`), ``gcu_test.go`` for whole GCUs
(:mod:`caldera.devices.enflame_gcu`). Each test names the Go test it follows; each row is named
by its Go case, or by the rule of HAMi's code it states where no Go case covers it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field

import pytest

from caldera.devices.enflame import (
    ALLOCATED,
    CAPACITY_ANNOTATION,
    DRS_COUNT,
    ENFLAME,
    KEYS,
    capacity_cards,
    container_request,
    decode,
    drs_annotations,
    encode,
    parse_capacity,
)
from caldera.devices.enflame_drs import (
    INT32_MAX,
    MODE_BY_SPEC,
    DrsCard,
    DrsGrant,
    DrsRequest,
    add_usage,
    collect_profiles,
    drs_request,
    drs_walk,
    slots_of,
)
from caldera.devices.enflame_gcu import ENFLAME_GCU, gcu_walk
from caldera.devices.enflame_gcu import KEYS as GCU_KEYS
from caldera.devices.enflame_gcu import capacity_cards as gcu_cards
from caldera.devices.enflame_gcu import container_request as gcu_request
from caldera.devices.fit import NO_GIVEN, CardUse, fit_node, pod_usage, reason_text
from caldera.devices.model import Card, CardRequest, Grant, NodeView, RegistrationError
from caldera.devices.vendors import FAMILIES, node_cards

MENU = (("1g.6gb", "0"), ("3g.20gb", "1"), ("6g.40gb", "2"))
"""The profile menu of HAMi's tests."""
SPEC = (
    '{"devices":[{"index":"0","minor":"0","capacity":6}],'
    '"profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}}'
)
"""``TestGetNodeDevices_DRSAnnotation``'s annotation."""
MEMORY, CORES = "enflame.com/gcu-memory", "enflame.com/gcu-core"


# -- GetNodeDevices ----------------------------------------------------------------------------


def test_get_node_devices_reads_the_drs_annotation() -> None:
    """``TestGetNodeDevices_DRSAnnotation``: one GCU of 6 slices, the largest profile's 40 GiB."""
    (card,) = capacity_cards("node-a", {CAPACITY_ANNOTATION: SPEC}, {})
    assert isinstance(card, DrsCard)
    assert (card.id, card.type, card.devmem, card.count, card.minor) == (
        "node-a-enflame-drs-0",
        "Enflame",
        40960,
        6,
        "0",
    )
    assert (card.devcore, card.health, card.profiles, card.max_slice) == (100, True, MENU, 6)


def _spec(devices: str, profiles: str = '{"1g.6gb":"0","6g.40gb":"2"}') -> str:
    return f'{{"devices":{devices},"profiles":{profiles}}}'


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        ({}, f"annotation not found {CAPACITY_ANNOTATION}"),
        ({CAPACITY_ANNOTATION: "{"}, f"failed to parse {CAPACITY_ANNOTATION}"),
        ({CAPACITY_ANNOTATION: _spec('[{"index":0}]')}, f"failed to parse {CAPACITY_ANNOTATION}"),
        ({CAPACITY_ANNOTATION: _spec('[{"capacity":6}]', '{"big":"0"}')}, "no valid drs profiles"),
        ({CAPACITY_ANNOTATION: _spec('[{"capacity":0}]')}, "invalid drs capacity on node n1"),
        ({CAPACITY_ANNOTATION: _spec('[{"capacity":true}]')}, "invalid drs capacity on node n1"),
        ({CAPACITY_ANNOTATION: _spec("[]")}, "no drs devices found on node n1"),
    ],
    ids=[
        "annotation not found",
        "not valid JSON",
        "an index that is not a string fails Go's decoder",
        "no profile of <n>g.<m>gb",
        "a capacity that is not positive",
        "a capacity of an unknown type",
        "no device",
    ],
)
def test_get_node_devices_refuses_what_hami_refuses(annotations: dict[str, str], says: str) -> None:
    """``GetNodeDevices``' errors, in its order."""
    with pytest.raises(RegistrationError, match=re.escape(says)):
        capacity_cards("n1", annotations, {})


def test_get_node_devices_falls_back_on_the_position_the_index_and_the_slices() -> None:
    """``GetNodeDevices``: an index that is not a number is the device's position, a blank
    minor is the index, a menu without memory gives each GiB per slice."""
    spec = _spec('[{"capacity":"4"},{"Index":"x","MINOR":" ","capacity":4.9}]', '{"4g.x":"0"}')
    cards = capacity_cards("n1", {CAPACITY_ANNOTATION: spec}, {})
    assert [(c.id, c.index, c.count, c.devmem) for c in cards] == [
        ("n1-enflame-drs-0", 0, 4, 4096),
        ("n1-enflame-drs-1", 1, 4, 4096),
    ]
    assert [c.minor for c in cards if isinstance(c, DrsCard)] == ["0", "1"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (math.nan, None),
        (math.inf, None),
        (1e300, None),
        (42.0, 42),
        ("2147483648", INT32_MAX),
        (" 6 ", 6),
        (None, None),
    ],
    ids=["NaN", "Inf", "1e300", "42", "a string above int32 is clamped", "spaces", "null"],
)
def test_parse_drs_capacity(raw: object, expected: int | None) -> None:
    """``TestParseDRSCapacity_RejectsNaNAndInf``."""
    assert parse_capacity(raw) == expected


def test_the_gcus_are_read_from_a_node_advertising_drs_gcu() -> None:
    """HAMi reads the annotation alone; Caldera needs the node's name, so it reads it on a node
    advertising ``enflame.com/drs-gcu``."""
    annotations = {CAPACITY_ANNOTATION: SPEC}
    got = node_cards(ENFLAME, NodeView("node-a", annotations, {DRS_COUNT: 6}))
    assert isinstance(got, tuple) and [c.id for c in got] == ["node-a-enflame-drs-0"]
    assert node_cards(ENFLAME, NodeView("node-a", annotations, {})) == ()
    assert node_cards(ENFLAME, NodeView("node-a", {}, {DRS_COUNT: 6})) == (
        f"annotation not found {CAPACITY_ANNOTATION}"
    )


# -- GenerateResourceRequests ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        ({DRS_COUNT: 3}, {}, drs_request(3)),
        ({MEMORY: 20480, CORES: 40}, {}, drs_request(20480, MODE_BY_SPEC, 40)),
        ({"enflame.com/vgcu": 2}, {}, None),
        ({}, {DRS_COUNT: 2}, drs_request(2)),
        ({DRS_COUNT: 2**31}, {}, None),
        ({DRS_COUNT: 0, MEMORY: 6}, {}, drs_request(6, MODE_BY_SPEC)),
        ({MEMORY: 0.5}, {}, drs_request(-1, MODE_BY_SPEC)),
        ({MEMORY: 20 * 2**30}, {}, None),
        ({}, {}, None),
    ],
    ids=[
        "TestGenerateResourceRequests",
        "TestGenerateResourceRequests_ByMemoryCore",
        "TestResourceNameMismatchSilentlySkipsPod",
        "the count read from requests when limits name none",
        "a count above int32 asks for nothing",
        "a count of zero falls through to memory and cores",
        "a memory that is not whole reads as -1",
        "a memory in bytes is above int32",
        "no enflame resource",
    ],
)
def test_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], expected: CardRequest | None
) -> None:
    """``TestGenerateResourceRequests``, ``_ByMemoryCore`` and ``config_test.go``'s
    ``TestResourceNameMismatchSilentlySkipsPod``: one GCU, the slices or memory and cores."""
    assert container_request(limits, requests) == expected


@pytest.mark.parametrize(
    ("cores", "accepted"),
    [(0, True), (50, True), (100, True), (101, False), (150, False), (200, False), (-1, False)],
    ids=[
        "cores 0 accepted",
        "cores 50 accepted",
        "cores 100 accepted",
        "cores 101 rejected",
        "cores 150 rejected",
        "cores 200 rejected",
        "negative cores -1 rejected",
    ],
)
def test_generate_resource_requests_cores_validation(cores: int, accepted: bool) -> None:
    """``Test_GenerateResourceRequests_CoresValidation``."""
    got = container_request({MEMORY: 20480, CORES: cores}, {})
    assert got == (drs_request(20480, MODE_BY_SPEC, cores) if accepted else None)


def test_the_drs_names_are_the_charts() -> None:
    """``TestDRSGCUFlagResolution`` "no flags falls back to default", and the chart's
    ``enflameResourceNameGCUMemory``/``GCUCore``."""
    assert ENFLAME.count_resource == "enflame.com/drs-gcu"
    assert ENFLAME.resources == {"enflame.com/drs-gcu", MEMORY, CORES}
    assert container_request({DRS_COUNT: 1}, {}) == DrsRequest(
        "Enflame", 1, 0, 101, 1, memory=1, mode=0, cores=0
    )


# -- Fit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gcu:
    """One GCU as the Go tests write its ``DeviceUsage``."""

    uuid: str = "node-a-enflame-drs-0"
    count: int = 6
    used: tuple[int, int, int] = (0, 0, 0)
    """(slices, memory, cores) in use."""
    health: bool = True
    mem: int = 40960
    core: int = 0
    """``Totalcore`` (the Go tests mostly leave it 0: no core check)."""
    menu: tuple[tuple[str, str], ...] = MENU
    max_slice: int = 0


def _card(g: Gcu, index: int = 0) -> DrsCard:
    card = DrsCard(g.uuid, g.count, g.mem, g.core, "Enflame", g.health, index, minor=str(index))
    return dataclasses.replace(card, profiles=g.menu, max_slice=g.max_slice)


@dataclass(frozen=True)
class FitCase:
    gcus: list[Gcu]
    request: CardRequest
    chosen: tuple[str, int, int, str, str] | None
    """(GCU, memory, cores, profile name, profile id) of the instance, or None."""
    reason: str = ""
    pod: dict[str, str] = field(default_factory=dict)


FIT_CASES = {
    "TestFit_SelectProfileByRequest": FitCase(
        [Gcu()], drs_request(3), ("node-a-enflame-drs-0", 20480, 50, "3g.20gb", "1")
    ),
    "TestFit_SelectProfileByMemoryCoreRequest": FitCase(
        [Gcu()],
        drs_request(20480, MODE_BY_SPEC, 40),
        ("node-a-enflame-drs-0", 20480, 50, "3g.20gb", "1"),
    ),
    "TestFit_ProfileNotFound": FitCase(
        [Gcu(health=False, menu=(("1g.6gb", "0"),))], drs_request(3), None, "1/1 ModeNotFit"
    ),
    # HAMi's row asks 3 slices of a GCU with 1 of 2 free: since PR #2877 the slice check refuses
    # it before the policy, so the mutex row asks 1 slice
    "TestFit_MutexRejectsUsedDevice": FitCase(
        [Gcu(count=2, used=(1, 0, 0))],
        drs_request(1),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
        {"hami.io/gpu-scheduler-policy": "mutex"},
    ),
    "TestFit_MutexRejectsUsedDevice as written: 3 slices of 1 free": FitCase(
        [Gcu(count=2, used=(1, 0, 0))],
        drs_request(3),
        None,
        "1/1 CardTimeSlicingExhausted",
        {"hami.io/gpu-scheduler-policy": "mutex"},
    ),
    "TestFit_UnhealthyDeviceRejected": FitCase(
        [Gcu(health=False)], drs_request(3), None, "1/1 CardNotHealth"
    ),
    "TestFit_OversizedProfileRejected: slices and memory": FitCase(
        [Gcu(menu=(("4294967299g.4294967299gb", "0"),))],
        drs_request(3, 101),
        None,
        "1/1 ModeNotFit",
    ),
    "TestFit_OversizedProfileRejected: slices": FitCase(
        [Gcu(menu=(("4294967299g.20gb", "0"),))], drs_request(3, 101), None, "1/1 ModeNotFit"
    ),
    "TestFit_OversizedProfileRejected: memory": FitCase(
        [Gcu(menu=(("2g.4294967299gb", "0"),))], drs_request(3, 101), None, "1/1 ModeNotFit"
    ),
    "TestFit_OversizedProfileRejected: cores": FitCase(
        [Gcu(menu=(("2147483647g.20gb", "0"),), max_slice=1)],
        drs_request(3, 101),
        None,
        "1/1 ModeNotFit",
    ),
    "TestDRSSlice_PartialCapacityRejectsFullProfile: 3 slices of 2 free": FitCase(
        [Gcu(used=(4, 0, 0), mem=400000)], drs_request(3), None, "1/1 CardTimeSlicingExhausted"
    ),
    "TestDRSSlice_PartialCapacityRejectsFullProfile: 1 slice of 2 free": FitCase(
        [Gcu(used=(4, 0, 0), mem=400000)],
        drs_request(1),
        ("node-a-enflame-drs-0", 6144, 16, "1g.6gb", "0"),
    ),
    "Test_checkType the different type": FitCase(
        [Gcu()],
        DrsRequest("test123", 1, 0, 101, 1, memory=3, mode=0, cores=0),
        None,
        "1/1 CardTypeMismatch",
    ),
    "CheckUUID: a GCU the pod does not name": FitCase(
        [Gcu()],
        drs_request(3),
        None,
        "1/1 CardUuidMismatch",
        {"enflame.com/use-gpuuuid": "node-a-enflame-drs-1"},
    ),
    "CheckUUID: a GCU the pod excludes": FitCase(
        [Gcu()],
        drs_request(3),
        None,
        "1/1 CardUuidMismatch",
        {"enflame.com/nouse-gpuuuid": " node-a-enflame-drs-0 ,x"},
    ),
    "the profile's memory": FitCase(
        [Gcu(used=(1, 30720, 0))], drs_request(3), None, "1/1 CardInsufficientMemory"
    ),
    "the profile's cores, when the GCU has a compute total": FitCase(
        [Gcu(used=(1, 0, 60), core=100)], drs_request(3), None, "1/1 CardInsufficientCore"
    ),
    "the smallest profile holding memory given in GiB": FitCase(
        [Gcu()],
        drs_request(21, MODE_BY_SPEC),
        ("node-a-enflame-drs-0", 40960, 100, "6g.40gb", "2"),
    ),
    "no profile holds the cores asked": FitCase(
        [Gcu(menu=(("1g.6gb", "0"),), max_slice=6)],
        drs_request(0, MODE_BY_SPEC, 40),
        None,
        "1/1 ModeNotFit",
    ),
}


def fit(case: FitCase) -> tuple[DrsGrant | None, str]:
    """``EnflameDevices.Fit`` of one container: the instance (None: none), HAMi's reason."""
    cards = [_card(g, i) for i, g in enumerate(case.gcus)]
    uses = [CardUse(*g.used) for g in case.gcus]
    opts = ENFLAME.read_options(case.pod, "spread", frozenset())
    grants, reasons, _ = drs_walk(cards, uses, case.request, opts, "Enflame", NO_GIVEN)
    if grants is None:
        return None, reason_text(reasons, len(cards))
    (grant,) = grants
    assert isinstance(grant, DrsGrant)
    return grant, ""


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_fit(case: FitCase) -> None:
    """``TestFit_*`` of ``device_test.go`` and ``drs_reconstruction_test.go``."""
    grant, reason = fit(case)
    assert reason == case.reason
    got = grant and (grant.uuid, grant.memory, grant.cores, grant.profile_name, grant.profile_id)
    assert got == case.chosen


def test_a_profile_takes_its_slices_and_the_gcus_minor_and_index() -> None:
    """``Fit``'s ``Slots: profileSlices`` and ``CustomInfo`` (minor, index, drsSlice)."""
    grant, _ = fit(FitCase([Gcu(), Gcu("node-a-enflame-drs-1")], drs_request(3), None))
    assert grant is not None
    assert (grant.uuid, grant.minor, grant.index, grant.slots) == (
        "node-a-enflame-drs-1",
        "1",
        "1",
        3,
    )


def test_the_core_budget_is_rounded_down() -> None:
    """``device_corebudget_test.go``: a slice of six costs 16 % (ceil gave 17, and six of them
    102 %), so the cores of a fully sliced GCU never pass 100."""
    profiles = collect_profiles([_card(Gcu())])
    assert [(p.name, p.size, p.memory_gb, p.core_percent) for p in profiles] == [
        ("1g.6gb", 1, 6, 16),
        ("3g.20gb", 3, 20, 50),
        ("6g.40gb", 6, 40, 100),
    ]


def _fill(gcu: Gcu, requests: list[DrsRequest]) -> tuple[CardUse, list[DrsGrant]]:
    """Fit each request on one GCU in turn, taking its usage (``AddResourceUsage``)."""
    card, use, taken = _card(gcu), CardUse(), []
    opts = ENFLAME.read_options({}, "spread", frozenset())
    for request in requests:
        grants, reasons, _ = drs_walk([card], [use], request, opts, "Enflame", NO_GIVEN)
        assert grants is not None, reason_text(reasons, 1)
        (grant,) = grants
        assert isinstance(grant, DrsGrant)
        add_usage(use, grant)
        taken.append(grant)
    return use, taken


def test_all_advertised_slices_are_schedulable() -> None:
    """``TestFit_AllAdvertisedSlicesSchedulable``: six 1g.6gb on a 6-slice GCU of 100 % cores,
    then a seventh is refused."""
    use, _ = _fill(Gcu(core=100), [drs_request(1)] * 6)
    assert use.used == 6
    opts = ENFLAME.read_options({}, "spread", frozenset())
    grants, reasons, _ = drs_walk([_card(Gcu(core=100))], [use], drs_request(1), opts, "", NO_GIVEN)
    assert grants is None and reason_text(reasons, 1) == "1/1 CardTimeSlicingExhausted"


def test_mixed_profiles_fill_a_gcu() -> None:
    """``TestFit_MixedProfilesFillDevice``: one 3g.20gb and three 1g.6gb take all six slices."""
    use, _ = _fill(Gcu(core=100), [drs_request(3)] + [drs_request(1)] * 3)
    assert use.used == 6


def test_the_slice_count_survives_the_allocation_string() -> None:
    """``TestDRSSlice_SlotCountSurvivesReconstruction``: ``AddResourceUsage`` takes 3 slices,
    and the allocation string read back says 3."""
    use, (grant,) = _fill(Gcu(core=100), [drs_request(3)])
    assert grant.slots == 3 and use.used == 3
    (back,) = decode(encode([[grant]]))[0]
    assert slots_of(back) == use.used


@pytest.mark.parametrize(
    ("grant", "slices"),
    [
        (DrsGrant("g", "Enflame", 20480, 50, slots=3), 3),
        (Grant("g", "Enflame", 20480, 50), 1),
        (decode("g,Enflame,20480,50,3:;")[0][0], 3),
    ],
    ids=[
        "slots wins over a stale CustomInfo",
        "neither set counts as one slice",
        "annotation round trip keeps the count",
    ],
)
def test_the_slice_count_prefers_slots(grant: Grant, slices: int) -> None:
    """``TestDRSSlice_SliceCountPrefersSlots`` (no ``CustomInfo`` here: the walk records the
    slices as ``Slots``): ``AddResourceUsage`` and ``PatchAnnotations`` agree."""
    assert slots_of(grant) == slices
    use = CardUse()
    add_usage(use, grant)
    assert use.used == slices
    assert drs_annotations([[grant]], 0.0)["enflame.com/gcu-request-size"] == str(slices)


def test_a_gcu_full_on_slices_refuses_a_profile_after_a_restart() -> None:
    """``TestDRSSlice_ReconstructionRejectsSliceOversubscription``: two 3g.20gb fill a GCU; its
    usage rebuilt from their allocation strings refuses a third."""
    gcu = Gcu(mem=400000)
    use, taken = _fill(gcu, [drs_request(3)] * 2)
    assert use.used == 6
    rebuilt = CardUse()
    for grant in taken:
        for back in decode(encode([[grant]]))[0]:
            add_usage(rebuilt, back)
    assert rebuilt == use
    opts = ENFLAME.read_options({}, "spread", frozenset())
    grants, reasons, _ = drs_walk(
        [_card(gcu)], [rebuilt], drs_request(3), opts, "Enflame", NO_GIVEN
    )
    assert grants is None and reason_text(reasons, 1) == "1/1 CardTimeSlicingExhausted"


def test_add_resource_usage_clamps_on_overflow() -> None:
    """``TestAddResourceUsage_ClampsOnOverflow``: the slices stop at int32's largest."""
    use = CardUse()
    grant = DrsGrant("g", "Enflame", 0, 0, slots=INT32_MAX)
    add_usage(use, grant)
    add_usage(use, grant)
    assert use.used == INT32_MAX


@pytest.mark.parametrize(
    ("policy", "chosen"),
    [("spread", "node-a-enflame-drs-0"), ("binpack", "node-a-enflame-drs-1")],
    ids=["spread: the least used GCU", "binpack: the most used GCU"],
)
def test_the_gcus_are_walked_in_hamis_card_order(policy: str, chosen: str) -> None:
    """``fitInDevices`` sorts the GCUs by the policy's score (``ComputeScore``: 0 for a GCU
    without a compute total) and ``Fit`` walks from the end; HAMi's check of the node's GCUs
    against the request's number comes first."""
    cards = [_card(Gcu(core=100), 0), _card(Gcu("node-a-enflame-drs-1", core=100), 1)]
    uses = [CardUse(), CardUse(3, 20480, 50)]
    opts = ENFLAME.read_options({"hami.io/gpu-scheduler-policy": policy}, "spread", frozenset())
    got = fit_node(cards, uses, [(False, drs_request(1))], opts, "Enflame", ENFLAME.walk)
    assert got.grants is not None and [g.uuid for g in got.grants[0]] == [chosen]
    none = fit_node([], [], [(False, drs_request(1))], opts, "Enflame", ENFLAME.walk)
    assert none.reason == "1/0 NodeInsufficientDevice"


# -- PatchAnnotations and the allocation string ------------------------------------------------

INSTANCE = DrsGrant(
    "node-a-enflame-drs-0",
    "Enflame",
    20480,
    50,
    profile_name="3g.20gb",
    profile_id="1",
    minor="0",
    index="0",
    slots=3,
)
"""``TestPatchAnnotations_DRSFields``' device, with the slices ``Fit`` records."""


def test_patch_annotations_writes_the_drs_fields() -> None:
    """``TestPatchAnnotations_DRSFields``."""
    got = drs_annotations([[INSTANCE]], 1_800_000_000.5, ["pod-gcu-example1"])
    assert got == {
        "enflame.com/gcu-assigned": "false",
        "enflame.com/gcu-assigned-time": "1800000000500000000",
        "enflame.com/gcu-assigned-index": "0",
        "enflame.com/gcu-assigned-id": "0",
        "enflame.com/gcu-assigned-minor": "0",
        "enflame.com/gcu-request-size": "3",
        "assigned-containers": (
            '{"pod-gcu-example1":{"allocated":false,"request":3,'
            '"profileID":"1","profileName":"3g.20gb"}}'
        ),
    }
    assigned = json.loads(got["assigned-containers"])["pod-gcu-example1"]
    assert assigned == {
        "allocated": False,
        "request": 3,
        "profileID": "1",
        "profileName": "3g.20gb",
    }


def test_the_bind_writes_the_allocation_once_and_enflames_keys() -> None:
    """``PatchAnnotations``: ``hami.io/enflame-vgpu-devices-allocated`` holds the allocation
    (no to-allocate key), beside HAMi's generic bind annotations."""
    got = ENFLAME.bind_annotations("node-a", [[INSTANCE]], 1_800_000_000.0)
    assert got[ALLOCATED] == "node-a-enflame-drs-0,Enflame,20480,50,3:;"
    assert ",20480,50" in got[ALLOCATED]
    assert set(got) == set(ENFLAME.written)
    assert got["hami.io/vgpu-node"] == "node-a"
    assert "hami.io/vgpu-devices-to-allocate" not in got
    assert (KEYS.lock, ENFLAME.cordon_annotation) == ("", "")


def test_the_first_container_holding_a_gcu_names_it() -> None:
    """``PatchAnnotations``: containers are named by index (init containers first;
    ``container-<i>`` when the name is not known), those without a GCU skipped, and the first
    one with a GCU sets the index, minor and size."""
    one = DrsGrant("n-enflame-drs-1", "Enflame", 6144, 16, None, "1g.6gb", "0", "1", "1", 1)
    got = drs_annotations([[], [one], [INSTANCE]], 0.0, ["init", "a"])
    assert (got["enflame.com/gcu-assigned-index"], got["enflame.com/gcu-request-size"]) == (
        "1",
        "1",
    )
    assert json.loads(got["assigned-containers"]) == {
        "a": {"allocated": False, "request": 1, "profileID": "0", "profileName": "1g.6gb"},
        "container-2": {
            "allocated": False,
            "request": 3,
            "profileID": "1",
            "profileName": "3g.20gb",
        },
    }


@pytest.mark.parametrize(
    ("text", "slices"),
    [
        ("g,Enflame,6144,16:;", [1]),
        ("g,Enflame,20480,50,3:;", [3]),
        ("g,Enflame,20480,50,x:;", [1]),
        ("g,Enflame,20480,50,-1:;", [1]),
        (";g,Enflame,20480,50,0:;", [1]),
    ],
    ids=[
        "four fields: one slice",
        "the fifth field is the slices",
        "a fifth field that is not a number is ignored",
        "a negative fifth field is ignored",
        "an empty container kept",
    ],
)
def test_the_allocation_string_carries_the_slices(text: str, slices: list[int]) -> None:
    """``EncodeContainerDevices``/``DecodeContainerDevices`` since PR #2877."""
    containers = decode(text)
    assert [slots_of(g) for c in containers for g in c] == slices
    assert containers[-1][0].memory in (6144, 20480)


def test_the_slices_are_written_only_when_more_than_one() -> None:
    """``EncodeContainerDevices``: ``if val.Slots > 1``."""
    one = DrsGrant("g", "Enflame", 6144, 16, slots=1)
    assert encode([[one], [], [INSTANCE]]) == (
        "g,Enflame,6144,16:;;node-a-enflame-drs-0,Enflame,20480,50,3:;"
    )


def test_both_dialects_are_shared_by_naming_enflame() -> None:
    """Both belong to the ``enflame`` section of HAMi's device ConfigMap."""
    assert ENFLAME.family == ENFLAME_GCU.family == "enflame"
    assert "enflame" in FAMILIES


# -- gcu_test.go -------------------------------------------------------------------------------


def test_init_gcu_device() -> None:
    """``TestInitGCUDevice`` and ``TestGCUDevices_CommonWord``."""
    assert GCU_KEYS.to_allocate == "hami.io/enflame-gcu-devices-to-allocate"
    assert GCU_KEYS.allocated == "hami.io/enflame-gcu-devices-allocated"
    assert ENFLAME_GCU.name == "GCU" and ENFLAME_GCU.count_resource == "enflame.com/gcu"
    assert GCU_KEYS.lock == ""


def test_gcu_get_node_devices() -> None:
    """``TestGCUDevices_GetNodeDevices`` "Test with valid node"."""
    cards = gcu_cards("testnode", {}, {"enflame.com/gcu": 2})
    assert cards == [
        Card("testnode-GCU-0", 1, 100, 100, "GCU", True, 0),
        Card("testnode-GCU-1", 1, 100, 100, "GCU", True, 1),
    ]


@pytest.mark.parametrize(
    "capacity",
    [{}, {"enflame.com/gcu": 0}, {"enflame.com/gcu": 1.5}],
    ids=["Test with missing resource", "zero GCUs", "not a whole number"],
)
def test_gcu_get_node_devices_refuses_a_node_without_gcus(capacity: dict[str, float]) -> None:
    """``TestGCUDevices_GetNodeDevices``: "device not found enflame.com/gcu"."""
    with pytest.raises(RegistrationError, match=re.escape("device not found enflame.com/gcu")):
        gcu_cards("testnode", {}, capacity)


def test_gcu_check_health() -> None:
    """``TestGCUDevices_CheckHealth``: a node with GCU capacity has GCUs, one without none."""
    got = node_cards(ENFLAME_GCU, NodeView("n", {}, {"enflame.com/gcu": 2}))
    assert isinstance(got, tuple) and len(got) == 2
    assert node_cards(ENFLAME_GCU, NodeView("n", {}, {})) == ()


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        ({"enflame.com/gcu": 3}, {}, CardRequest("GCU", 3, 100, 100, 100)),
        ({}, {"enflame.com/gcu": 2}, CardRequest("GCU", 2, 100, 100, 100)),
        ({}, {}, None),
        ({"enflame.com/gcu": 0}, {}, None),
        ({"enflame.com/gcu": 0.5}, {}, None),
    ],
    ids=[
        "GCU resource set to limits",
        "GCU resource set to requests",
        "GCU resource not set",
        "zero GCUs ask for nothing",
        "a number that is not whole asks for nothing",
    ],
)
def test_gcu_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], expected: CardRequest | None
) -> None:
    """``TestGCUDevices_GenerateResourceRequests``."""
    assert gcu_request(limits, requests) == expected


def _gcus(nums: int, kind: str = "GCU") -> CardRequest:
    return CardRequest(kind, nums, 100, 100, 100)


@dataclass(frozen=True)
class GcuCase:
    health: list[bool]
    used: list[int]
    """Users of each GCU (a used GCU holds all its memory and cores)."""
    asked: CardRequest
    chosen: list[str] | None
    reason: str = ""


GCU_FIT_CASES = {
    "fit success": GcuCase([True, True], [0, 0], _gcus(1), ["dev-1"]),
    "fit fail: type mismatch": GcuCase(
        [True], [0], _gcus(1, "OtherType"), None, "1/1 CardTypeMismatch"
    ),
    "fit fail: device already used": GcuCase(
        [True], [1], _gcus(1), None, "1/1 ExclusiveDeviceAllocateConflict"
    ),
    "fit fail: insufficient devices": GcuCase(
        [True], [0], _gcus(2), None, "1/1 AllocatedCardsInsufficientRequest"
    ),
    "fit fail: partial allocation AllocatedCardsInsufficientRequest for multiple cards": GcuCase(
        [True, True], [0, 0], _gcus(3), None, "2/2 AllocatedCardsInsufficientRequest"
    ),
    "fit fail: CardNotHealth": GcuCase([False], [0], _gcus(1), None, "1/1 CardNotHealth"),
}


@pytest.mark.parametrize("case", GCU_FIT_CASES.values(), ids=GCU_FIT_CASES.keys())
def test_gcu_fit(case: GcuCase) -> None:
    """``TestGCUDevices_Fit``."""
    cards = [Card(f"dev-{i}", 1, 100, 100, "GCU", h, i) for i, h in enumerate(case.health)]
    uses = [CardUse(u, 100 * u, 100 * u) for u in case.used]
    opts = ENFLAME_GCU.read_options({}, "spread", frozenset())
    grants, reasons, _ = gcu_walk(cards, uses, case.asked, opts, "GCU", NO_GIVEN)
    assert (None if grants is None else [g.uuid for g in grants]) == case.chosen
    assert ("" if grants is not None else reason_text(reasons, len(cards))) == case.reason
    if grants is not None:
        assert [(g.memory, g.cores) for g in grants] == [(100, 100)]


def test_gcu_patch_annotations() -> None:
    """``TestGCUDevices_PatchAnnotations`` "With GCU devices": both keys, HAMi's string."""
    got = ENFLAME_GCU.bind_annotations("testnode", [[Grant("testnode-GCU-0", "GCU", 0, 0)]], 0.0)
    assert got["hami.io/enflame-gcu-devices-to-allocate"] == "testnode-GCU-0,GCU,0,0:;"
    assert got["hami.io/enflame-gcu-devices-allocated"] == "testnode-GCU-0,GCU,0,0:;"
    assert set(got) == set(ENFLAME_GCU.written)


def test_gcu_add_resource_usage() -> None:
    """``TestGCUDevices_AddResourceUsage``: one more user, its cores and memory."""
    usage = pod_usage(0, [[Grant("dev-0", "GCU", 100, 50)]])
    assert usage == {"dev-0": CardUse(1, 100, 50)}


def test_a_drs_instance_takes_its_slices_of_the_gcus_sharing_slots() -> None:
    """``AddResourceUsage`` counts ``sliceCount`` slots per instance, in the seam's usage too:
    app containers summed, an init container at its largest instance."""
    three = DrsGrant("g", "Enflame", 20480, 50, slots=3)
    one = DrsGrant("g", "Enflame", 6144, 16, slots=1)
    assert pod_usage(0, [[three], [one]])["g"].used == 4
    assert pod_usage(1, [[three], [one]])["g"].used == 3
    assert pod_usage(0, [[DrsGrant("g", "Enflame", 1, 1)]])["g"].used == 1  # not known: one
