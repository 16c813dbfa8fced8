"""Cambricon MLUs the HAMi way: tables after HAMi's ``pkg/device/cambricon/device_test.go``.

Each test names the Go test it follows; each row is named by its Go case.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from caldera.devices.cambricon import (
    CAMBRICON_MLU,
    capacity_cards,
    container_request,
    dsmlu_annotations,
)
from caldera.devices.fit import Quota, hami_walk
from caldera.devices.model import Card, CardRequest, Grant, NodeView, RegistrationError
from caldera.devices.vendor import BindPod
from caldera.devices.vendors import node_cards
from caldera.k8s.nodelock import lock_value, parse_lock
from devices_cases import FitCase, Gpu, Verdict, hami_fit_cases, walk_fit

COUNT, MEMORY, CORES = (
    "cambricon.com/vmlu",
    "cambricon.com/mlu.smlu.vmemory",
    "cambricon.com/mlu.smlu.vcore",
)


def test_get_node_devices_lists_one_mlu_per_hundred_vcores() -> None:
    """``Test_GetNodeDevices``: 1 vcore and 1 vmemory give one MLU of 25600 MiB."""
    cards = capacity_cards("test", {}, {CORES: 1, MEMORY: 1})
    assert cards == [Card("test-cambricon-mlu-0", 100, 25600, 100, "MLU", True, index=0)]


def test_a_node_with_four_mlus_has_four_cards_sharing_its_memory() -> None:
    """``GetNodeDevices``: ``for i*100 < cards``, ``Devmem = memoryTotal*256*100/cards``."""
    cards = capacity_cards("n1", {}, {CORES: 400, MEMORY: 640})
    assert [c.id for c in cards] == [f"n1-cambricon-mlu-{i}" for i in range(4)]
    assert {c.devmem for c in cards} == {640 * 256 * 100 // 400}
    assert [c.index for c in cards] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "capacity",
    [{MEMORY: 64}, {CORES: 0, MEMORY: 64}, {CORES: 1.5}],
    ids=["no vcore capacity", "zero vcores", "vcores not a whole number"],
)
def test_a_node_without_vcores_has_no_mlu(capacity: dict[str, float]) -> None:
    """``GetNodeDevices``: "device not found" when the vcore capacity is absent or 0."""
    with pytest.raises(RegistrationError, match=re.escape(f"device not found {CORES}")):
        capacity_cards("n1", {}, capacity)


def test_the_cards_are_read_from_the_nodes_capacity_through_the_vendor_seam() -> None:
    view = NodeView("n1", {}, {CORES: 200, MEMORY: 128})
    got = node_cards(CAMBRICON_MLU, view)
    assert isinstance(got, tuple) and [c.id for c in got] == [
        "n1-cambricon-mlu-0",
        "n1-cambricon-mlu-1",
    ]
    assert node_cards(CAMBRICON_MLU, NodeView("cpu", {}, {})) == ()
    assert CAMBRICON_MLU.source == f"status.capacity[{CORES}, {MEMORY}]"


def _request(nums: int, memreq: int, percentage: int, cores: int) -> CardRequest:
    return CardRequest("MLU", nums, memreq, percentage, cores)


@pytest.mark.parametrize(
    ("limits", "requests", "expected"),
    [
        ({}, {}, None),
        (
            {COUNT: 1, MEMORY: 1000, CORES: 2},
            {COUNT: 1, MEMORY: 1000, CORES: 2},
            _request(1, 256000, 0, 2),
        ),
        ({COUNT: 1, MEMORY: 1000}, {COUNT: 1, MEMORY: 1000}, _request(1, 256000, 0, 100)),
        ({COUNT: 1, CORES: 2}, {COUNT: 1, CORES: 2}, _request(1, 0, 100, 2)),
        ({COUNT: 1, MEMORY: 16 * 2**30}, {}, None),
        ({COUNT: 1, MEMORY: 0.5}, {}, None),
        ({}, {COUNT: 2, MEMORY: 4}, _request(2, 1024, 0, 100)),
        ({COUNT: 0, MEMORY: 4}, {}, None),
    ],
    ids=[
        "don't set to limits and request",
        "resourcecoresname,resourcecountname and resourcememoryname set to limits and request",
        "resourcememoryname don't set to limits and requests",
        "resourcecoresname don't set to limits and requests",
        "memory overflowing int32 is rejected, not truncated to zero",
        "decimal-form memory request is rejected, not treated as zero",
        "the count read from requests when limits name none",
        "a count of zero asks for nothing",
    ],
)
def test_generate_resource_requests(
    limits: dict[str, float], requests: dict[str, float], expected: CardRequest | None
) -> None:
    """``Test_GenerateResourceRequests``."""
    assert container_request(limits, requests) == expected


FIT_CASES = {
    **hami_fit_cases(
        use_uuid="cambricon.com/use-gpuuuid",
        nouse_uuid="cambricon.com/nouse-gpuuuid",
        several_cards=True,
    ),
    "fit fail: CardNotHealth": FitCase(
        [Gpu("dev-0", 128, health=False)], (1, 64, 0, 50), None, "1/1 CardNotHealth"
    ),
    # TestDevices_Fit_ResourceQuotaWholeCardRequest (HAMi issue #2468): 50 vmemory of quota is
    # 12800 MiB, and a whole-card ask is charged the card's 40960 MiB
    "a whole-card request beyond the namespace quota is refused": FitCase(
        [Gpu("dev-0", 40960)],
        (1, 0, 100, 10),
        None,
        "1/1 ResourceQuotaNotFit",
        quota=Quota(memory=50 * 256),
    ),
}


def fit(case: FitCase) -> Verdict:
    """``CambriconDevices.Fit`` of one container: the MLUs chosen (None: none), the reason."""
    return walk_fit(case, vendor=CAMBRICON_MLU, word="MLU", walk=hami_walk)


@pytest.mark.parametrize("case", FIT_CASES.values(), ids=FIT_CASES.keys())
def test_devices_fit(case: FitCase) -> None:
    """``TestDevices_Fit`` and ``TestDevices_Fit_ResourceQuotaWholeCardRequest``."""
    assert fit(case) == (case.chosen, case.reason)


def test_the_namespace_quota_counts_vmemory_in_units_of_256_mib() -> None:
    """``fitQuota``: ``FitQuota(ns, mem, MemoryFactor, ...)`` scales the limit by 256."""
    assert CAMBRICON_MLU.memory_factor == 256


GRANT = Grant("device-0", "MLU", 256000, 1)


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        (
            [[GRANT]],
            {
                "CAMBRICON_DSMLU_ASSIGNED": "false",
                "CAMBRICON_DSMLU_PROFILE": "0_1_1000",
                "hami.io/cambricon-mlu-devices-to-allocate": "device-0,MLU,256000,1:;",
                "hami.io/cambricon-mlu-devices-allocated": "device-0,MLU,256000,1:;",
            },
        ),
        (
            [[], [GRANT]],
            {
                "CAMBRICON_DSMLU_ASSIGNED": "false",
                "CAMBRICON_DSMLU_PROFILE": "0_1_1000",
                "hami.io/cambricon-mlu-devices-to-allocate": ";device-0,MLU,256000,1:;",
                "hami.io/cambricon-mlu-devices-allocated": ";device-0,MLU,256000,1:;",
            },
        ),
        (
            [[Grant("n1-cambricon-mlu-3", "MLU", 2560, 25)]],
            {
                "CAMBRICON_DSMLU_PROFILE": "3_25_10",
                "hami.io/cambricon-mlu-devices-allocated": "n1-cambricon-mlu-3,MLU,2560,25:;",
            },
        ),
    ],
    ids=["exist device", "leading container without device", "the index of the MLU chosen"],
)
def test_patch_annotations(containers: list[list[Grant]], expected: dict[str, str]) -> None:
    """``Test_PatchAnnotations``: the allocation and the sMLU profile the device plugin reads."""
    got = CAMBRICON_MLU.bind_annotations("n1", containers, 1_800_000_000.0)
    assert {k: got.get(k) for k in expected} == expected
    assert got["hami.io/vgpu-node"] == "n1"
    assert set(got) == set(CAMBRICON_MLU.written)


def test_patch_annotations_with_no_device_adds_nothing_of_cambricons() -> None:
    """``Test_PatchAnnotations`` "no device"."""
    assert dsmlu_annotations(BindPod({}), [[]], 0.0) == {}


def test_the_node_lock_is_cambricons_bare_time_lock_of_two_minutes() -> None:
    """``LockNode``/``setNodeLock``: ``cambricon.com/dsmlu.lock``, RFC 3339 time, 2 minutes."""
    assert CAMBRICON_MLU.keys.lock == "cambricon.com/dsmlu.lock"
    assert CAMBRICON_MLU.bare_lock and CAMBRICON_MLU.lock_expiry == 120.0


def test_a_bare_lock_value_is_the_rfc3339_time_alone() -> None:
    """``setNodeLock``: ``time.Now().Format(time.RFC3339)``, read back as a lock naming no pod."""
    now = datetime(2026, 11, 28, 20, 0, 0, tzinfo=UTC)
    assert lock_value("default", "p", now, bare=True) == "2026-11-28T20:00:00Z"
    assert parse_lock("2026-11-28T20:00:00Z") == (now, "", "")
