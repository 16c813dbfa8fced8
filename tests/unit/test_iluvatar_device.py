"""Iluvatar GPUs the HAMi way: tables after HAMi's ``pkg/device/iluvatar/device_test.go``.

Each test names the Go test it follows; each row is named by its Go case, or by the rule of
``device.go`` it pins where the Go test has no row for it.
"""

from __future__ import annotations

import re

import pytest

from caldera.devices.fit import CardUse, Quota, fit_node
from caldera.devices.hami import DEFAULTS
from caldera.devices.iluvatar import (
    DEFAULT_CONFIGS,
    ILUVATAR,
    decode_node_devices,
    iluvatar_walk,
    registered_cards,
)
from caldera.devices.model import Card, CardRequest, Grant, NodeView, RegistrationError
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import FAMILIES, VENDORS, node_cards
from devices_cases import MUTEX, FitCase, Gpu, Verdict, walk_fit

BY_WORD = {v.name: v for v in ILUVATAR}
MR_V100 = BY_WORD["MR-V100"]
COUNT, MEMORY, CORES = (
    "iluvatar.ai/MR-V100-vgpu",
    "iluvatar.ai/MR-V100.vMem",
    "iluvatar.ai/MR-V100.vCore",
)
UUID = "GPU-bad51c5a-ed4c-591d-91bf-c04a12e19eae"


# -- TestGetNodeDevices ----------------------------------------------------------------------


def test_get_node_devices_reads_the_colon_form() -> None:
    """``TestGetNodeDevices`` "exist device"."""
    cards = registered_cards(f"{UUID},10,8192,100,MR-V100,0,true:")
    assert cards == [Card(UUID, 10, 8192, 100, "MR-V100", True, index=0, numa=0)]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[]", "node annotation missing device separator"),
        ("", "node annotation missing device separator"),
        (":", "no gpu found on node"),
        ("GPU-0:", "malformed node annotation segment: 'GPU-0'"),
        ("GPU-0,10,8192,100,MR-V100,0:", "unexpected field count 6 in node annotation"),
        ("GPU-0,10,8192,100,MR-V100,0,true,0:", "unexpected field count 8 in node annotation"),
        ("GPU-0,2147483648,8192,100,MR-V100,0,true:", "invalid count field"),
        ("GPU-0,10, 8192,100,MR-V100,0,true:", "invalid memory field"),
        ("GPU-0,10,8192,1_00,MR-V100,0,true:", "invalid core field"),
        ("GPU-0,10,8192,100,MR-V100,0,yes:", "invalid health field"),
        ("GPU-0,10,8192,100,MR-V100,x,true:", "invalid numa field"),
        ("GPU-0,10,8192,100,MR-V100,0,true,-1,hami-core:", "index field must not be negative"),
        (f"{UUID},10,8192,100,MR-V100,0,true:\n", "malformed node annotation segment"),
    ],
    ids=[
        "no device",
        "failed to unmarshal node devices",
        "a separator and no card: no gpu found on node",
        "a segment without a comma is malformed",
        "7 or 9 fields, not 6",
        "7 or 9 fields, not 8",
        "the count is 32 bits",
        "no space around a number (ParseInt)",
        "no underscore in a number (base 10)",
        "health is a Go boolean word",
        "numa is an integer (Atoi)",
        "the index is not negative",
        "a trailing newline is a segment of its own",
    ],
)
def test_get_node_devices_refuses_what_go_refuses(text: str, says: str) -> None:
    """``TestGetNodeDevices`` (its error rows) and ``DecodeNodeDevices``' own errors."""
    with pytest.raises(RegistrationError, match=re.escape(says)):
        registered_cards(text)


def test_the_nine_field_form_gives_the_index_and_mode() -> None:
    """``DecodeNodeDevices``: fields 8 and 9 are the index and the mode; empty segments are
    skipped; a sign is allowed, as ``ParseInt`` allows it."""
    cards = decode_node_devices("a,4,100,100,BI-V150,1,T,3,hami-core::b,+4,100,100,BI-V150,-1,0:")
    assert cards == [
        Card("a", 4, 100, 100, "BI-V150", True, index=3, numa=1, mode="hami-core"),
        Card("b", 4, 100, 100, "BI-V150", False, index=0, numa=-1),
    ]


def test_the_cards_are_read_through_the_vendor_seam() -> None:
    """``TestGetNodeDevices`` "no annotation": the node has none of the chip's cards; an
    unreadable registration is reported with its field."""
    register = "hami.io/node-MR-V100-register"
    assert MR_V100.register_annotation == register
    assert node_cards(MR_V100, NodeView("node-03", {})) == ()
    got = node_cards(MR_V100, NodeView("node-01", {register: f"{UUID},10,8192,100,MR-V100,0,1:"}))
    assert isinstance(got, tuple) and [c.id for c in got] == [UUID]
    assert node_cards(MR_V100, NodeView("node-04", {register: ""})) == (
        "node annotation missing device separator"
    )
    assert MR_V100.source == f"metadata.annotations[{register}]"


# -- Test_GenerateResourceRequests -----------------------------------------------------------


def _request(nums: int, memreq: int, percentage: int, cores: int) -> CardRequest:
    return CardRequest("MR-V100", nums, memreq, percentage, cores)


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        (
            {COUNT: 1, MEMORY: 1000, CORES: 100},
            {COUNT: 1, MEMORY: 1000, CORES: 100},
            _request(1, 256000, 0, 100),
        ),
        ({}, {}, None),
        ({COUNT: 1}, {COUNT: 1}, _request(1, 0, 100, 0)),
        ({COUNT: 1, MEMORY: 16 * 2**30}, {}, None),
        ({COUNT: 1, MEMORY: 16.5 * 2**30}, {}, None),
        ({}, {COUNT: 2, MEMORY: 4, CORES: 50}, _request(2, 1024, 0, 50)),
        ({COUNT: 0, MEMORY: 4}, {}, None),
        ({COUNT: -1}, {}, None),
        ({COUNT: 2**32 + 1}, {}, _request(1, 0, 100, 0)),
        ({COUNT: 1.5}, {}, None),
        ({COUNT: 1, MEMORY: -1}, {}, None),
        ({COUNT: 1, MEMORY: (2**31 - 1) // 256}, {}, _request(1, 8388607 * 256, 0, 0)),
        ({COUNT: 1, MEMORY: 0}, {}, _request(1, 0, 100, 0)),
        ({COUNT: 1, CORES: 12.5}, {}, _request(1, 0, 100, 0)),
        ({COUNT: 1, CORES: 150}, {}, _request(1, 0, 100, 150)),
    ],
    ids=[
        "all resources set to limits and requests",
        "all resources don't set to limits and requests",
        "resourcemem don't set to limits and requests",
        "memory overflowing int32 is rejected, not truncated to zero",
        "decimal-form memory request is rejected, not treated as zero",
        "the resources read from requests when limits name none",
        "a count of zero asks for nothing (Resourcereqs keeps Nums > 0)",
        "a negative count asks for nothing",
        "the count is cut to 32 bits as int32(n) cuts it",
        "a count that is not a whole number asks for nothing (AsInt64)",
        "negative memory is rejected",
        "the largest memory MaxInt32/256 is read",
        "a memory of 0 asks for the whole card",
        "cores that are not a whole number are not read",
        "cores above 100 are kept (Fit cuts them)",
    ],
)
def test_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], expected: CardRequest | None
) -> None:
    """``Test_GenerateResourceRequests``."""
    assert MR_V100.read_request(limits, requests, DEFAULTS) == expected


def test_another_chip_reads_its_own_resources() -> None:
    """``GenerateResourceRequests`` reads the config's resource names: BI-V150's request is
    typed BI-V150, and MR-V100's resources are not its."""
    bi = BY_WORD["BI-V150"]
    limits = {"iluvatar.ai/BI-V150-vgpu": 1.0, "iluvatar.ai/BI-V150.vMem": 64.0}
    assert bi.read_request(limits, {}, DEFAULTS) == CardRequest("BI-V150", 1, 16384, 0, 0)
    assert bi.read_request({COUNT: 1}, {}, DEFAULTS) is None


# -- Test_Fit, TestFit_MutexRejectsUsedDevice, Test_checkType --------------------------------


def gpu(
    uuid: str, *, used: tuple[int, int, int] = (0, 0, 0), count: int = 100, health: bool = True
) -> Gpu:
    """One card as ``Test_Fit`` writes its ``DeviceUsage``: 128 MiB."""
    return Gpu(uuid, 128, used, count, health)


FIT_CASES = {
    "fit success": FitCase([gpu("dev-0"), gpu("dev-1")], (1, 64, 0, 50), ["dev-1"]),
    "fit fail: memory not enough": FitCase(
        [gpu("dev-0")], (1, 512, 0, 50), None, "1/1 CardInsufficientMemory"
    ),
    # the Go row is named for cores, but its memory is refused first
    "fit fail: core not enough": FitCase(
        [gpu("dev-0", used=(0, 0, 100))], (1, 512, 0, 50), None, "1/1 CardInsufficientMemory"
    ),
    "fit fail: type mismatch": FitCase(
        [gpu("dev-0")], (1, 512, 0, 50), None, "1/1 CardTypeMismatch", word="OtherType"
    ),
    "mutex policy rejects used device": FitCase(
        [gpu("dev-0", used=(1, 0, 0), count=2)],
        (1, 64, 0, 50),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
        pod=MUTEX,
    ),
    "fit fail: CardNotHealth": FitCase(
        [gpu("dev-0", health=False)], (1, 64, 0, 50), None, "1/1 CardNotHealth"
    ),
    "TestFit_MutexRejectsUsedDevice": FitCase(
        [gpu("dev-0", used=(1, 0, 0))],
        (1, 64, 0, 50),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
        pod=MUTEX,
    ),
    "the use-uuid selector hami.io/use-<commonWord>-uuid": FitCase(
        [gpu("dev-0"), gpu("dev-1")],
        (1, 64, 0, 50),
        ["dev-0"],
        "",
        pod={"hami.io/use-MR-V100-uuid": "dev-0"},
    ),
    "the no-use-uuid selector hami.io/no-use-<commonWord>-uuid": FitCase(
        [gpu("dev-0")],
        (1, 64, 0, 50),
        None,
        "1/1 CardUuidMismatch",
        pod={"hami.io/no-use-MR-V100-uuid": " dev-0 "},
    ),
    "a full card's sharing slots": FitCase(
        [gpu("dev-0", used=(100, 0, 0))], (1, 64, 0, 50), None, "1/1 CardTimeSlicingExhausted"
    ),
    "cores above 100 are cut to 100": FitCase([gpu("dev-0")], (1, 64, 0, 120), ["dev-0"]),
    "a whole card's cores on a used card": FitCase(
        [gpu("dev-0", used=(1, 0, 0))],
        (1, 64, 0, 100),
        None,
        "1/1 ExclusiveDeviceAllocateConflict",
    ),
    "no cores asked of a card whose cores are all used": FitCase(
        [gpu("dev-0", used=(1, 0, 100))], (1, 64, 0, 0), None, "1/1 CardComputeUnitsExhausted"
    ),
    "the memory percentage is of each card's memory": FitCase(
        [gpu("dev-0", used=(1, 100, 0))], (1, 0, 100, 0), None, "1/1 CardInsufficientMemory"
    ),
    "fewer fitting cards than asked": FitCase(
        [gpu("dev-0"), gpu("dev-1", health=False), gpu("dev-2")],
        (3, 64, 0, 10),
        None,
        "1/3 CardNotHealth, 2/3 AllocatedCardsInsufficientRequest",
    ),
    "no namespace quota is checked by Iluvatar's Fit": FitCase(
        [gpu("dev-0")], (1, 64, 0, 50), ["dev-0"], quota=Quota(memory=0, cores=0)
    ),
}


def fit(case: FitCase) -> Verdict:
    """``IluvatarDevices.Fit`` of one container: the cards chosen (None: none), the reason."""
    return walk_fit(case, vendor=MR_V100, word="MR-V100", walk=iluvatar_walk)


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_fit(case: FitCase) -> None:
    """``Test_Fit`` and ``TestFit_MutexRejectsUsedDevice``, then ``Fit``'s other checks."""
    assert fit(case) == (case.chosen, case.reason)


@pytest.mark.parametrize(
    ("word", "fits"),
    [("MR-V100", True), ("test123", False)],
    ids=["the same type", "the different type"],
)
def test_check_type_compares_the_request_with_the_common_word(word: str, fits: bool) -> None:
    """``Test_checkType``: only a request typed with the chip's commonWord is the chip's."""
    got = fit(FitCase([gpu("dev-0")], (1, 64, 0, 50), None, word=word))
    assert got == ((["dev-0"], "") if fits else (None, "1/1 CardTypeMismatch"))


def test_the_walk_skips_a_cordoned_card_no_more_than_hamis_does() -> None:
    """``Fit`` has no cordon check, and the vendor reads no cordon annotation."""
    assert MR_V100.cordon_annotation == ""
    opts = MR_V100.read_options({}, "spread", frozenset({"dev-0"}))
    assert opts.cordoned == frozenset()


# -- fit_node with the vendor's walk ---------------------------------------------------------


def _node(word: str, n: int, mem: int = 32768) -> list[Card]:
    return [Card(f"{word}-{i}", 4, mem, 100, word, True, i) for i in range(n)]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("spread", [["BI-V150-1"], ["BI-V150-0"]]), ("binpack", [["BI-V150-1"], ["BI-V150-1"]])],
    ids=["spread: the second container takes the other card", "binpack: the same card"],
)
def test_two_app_containers_share_the_node_by_the_gpu_policy(
    policy: str, expected: list[list[str]]
) -> None:
    """``fitInDevices``: the cards are sorted by score before each container's ``Fit``, which
    walks them from the end; the first container's share counts for the second."""
    vendor = BY_WORD["BI-V150"]
    request = CardRequest("BI-V150", 1, 8192, 0, 25)
    opts = vendor.read_options({"hami.io/gpu-scheduler-policy": policy}, "spread", frozenset())
    cards = _node("BI-V150", 2)
    got = fit_node(
        cards, [CardUse(), CardUse()], [(False, request)] * 2, opts, vendor.name, vendor.walk
    )
    assert got.grants is not None
    assert [[g.uuid for g in c] for c in got.grants] == expected
    assert got.grants[0] == [Grant("BI-V150-1", "BI-V150", 8192, 25)]


def test_a_node_with_too_few_of_the_chips_cards_is_refused_before_the_walk() -> None:
    """``fitInDevices``: ``NodeInsufficientDevice`` when the chip has fewer cards than asked;
    the node's other chips are not the request's."""
    vendor = BY_WORD["MR-V50"]
    cards = [*_node("MR-V50", 1), *_node("MR-V100", 2)]
    request = CardRequest("MR-V50", 2, 1024, 0, 0)
    opts = vendor.read_options({}, "spread", frozenset())
    got = fit_node(cards, [CardUse()] * 3, [(False, request)], opts, vendor.name, vendor.walk)
    assert got.grants is None and got.counts == {"NodeInsufficientDevice": 1}


def test_the_reason_counts_the_chips_cards() -> None:
    """``GenReason(reason, len(devices))``: out of the request type's cards on the node."""
    vendor = BY_WORD["BI-V100"]
    cards = _node("BI-V100", 2, mem=1024)
    request = CardRequest("BI-V100", 1, 4096, 0, 0)
    opts = vendor.read_options({}, "spread", frozenset())
    got = fit_node(cards, [CardUse()] * 2, [(False, request)], opts, vendor.name, vendor.walk)
    assert (got.grants, got.reason) == (None, "2/2 CardInsufficientMemory")


# -- TestPatchAnnotations, TestDevices_LockNode ----------------------------------------------


def test_patch_annotations() -> None:
    """``TestPatchAnnotations`` "With devices": the allocation on the chip's to-allocate and
    allocated keys, beside HAMi's node, time and bind keys."""
    containers = [[Grant("k8s-gpu-iluvatar-0", "MR-V100", 0, 0)]]
    got = MR_V100.bind_annotations("node-01", containers, 1_800_000_000.0)
    assert got == {
        "hami.io/MR-V100-devices-to-allocate": "k8s-gpu-iluvatar-0,MR-V100,0,0:;",
        "hami.io/MR-V100-devices-allocated": "k8s-gpu-iluvatar-0,MR-V100,0,0:;",
        "hami.io/vgpu-node": "node-01",
        "hami.io/vgpu-time": "1800000000",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1800000000",
    }
    assert set(got) == set(MR_V100.written)


def test_patch_annotations_keep_every_container_in_place() -> None:
    """``EncodePodSingleDevice``: one ``;`` per container, an empty one too."""
    containers = [[], [Grant("a", "MR-V100", 1024, 50), Grant("b", "MR-V100", 1024, 50)]]
    got = MR_V100.bind_annotations("n", containers, 0.0)
    assert got["hami.io/MR-V100-devices-allocated"] == ";a,MR-V100,1024,50:b,MR-V100,1024,50:;"
    assert MR_V100.decode(got["hami.io/MR-V100-devices-allocated"]) == containers


def test_the_node_lock_is_hamis_mutex_lock() -> None:
    """``TestDevices_LockNode``: ``LockNode`` takes ``nodelock.NodeLockKey``."""
    assert MR_V100.keys.lock == "hami.io/mutex.lock"
    assert MR_V100.lock_expiry is None and not MR_V100.bare_lock


# -- the device ConfigMap --------------------------------------------------------------------


def test_every_chip_of_hamis_device_configmap_is_a_vendor() -> None:
    """``InitIluvatarDevice`` over the chart's ``iluvatars``: the names it registers."""
    assert [c.common_word for c in DEFAULT_CONFIGS] == ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]
    assert [c.chip_name for c in DEFAULT_CONFIGS] == [c.common_word for c in DEFAULT_CONFIGS]
    for config, vendor in zip(DEFAULT_CONFIGS, ILUVATAR, strict=True):
        word = config.common_word
        assert isinstance(vendor, Vendor) and vendor.name == word
        assert vendor.resources == {
            f"iluvatar.ai/{word}-vgpu",
            f"iluvatar.ai/{word}.vMem",
            f"iluvatar.ai/{word}.vCore",
        }
        assert vendor.count_resource == f"iluvatar.ai/{word}-vgpu"
        assert (vendor.quota_memory, vendor.quota_cores) == (
            f"iluvatar.ai/{word}.vMem",
            f"iluvatar.ai/{word}.vCore",
        )
        assert vendor.register_annotation == f"hami.io/node-{word}-register"
        assert config.handshake_annotation == f"hami.io/node-handshake-{word}"
        assert vendor.keys.to_allocate == f"hami.io/{word}-devices-to-allocate"
        assert vendor.keys.allocated == f"hami.io/{word}-devices-allocated"
        assert (vendor.family, vendor.memory_factor) == ("iluvatar", 256)
        assert vendor in VENDORS
    assert "iluvatar" in FAMILIES
