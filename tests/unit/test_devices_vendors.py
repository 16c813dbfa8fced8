"""The two dialects besides HAMi's NVIDIA one: HAMi's Hygon DCU and Volcano's own vGPU."""

from __future__ import annotations

import pytest

from caldera.devices.hygon import HYGON_DCU
from caldera.devices.model import (
    UNSET_PERCENTAGE,
    Card,
    CardRequest,
    DeviceDefaults,
    Grant,
    RegistrationError,
)
from caldera.devices.vendor import Vendor
from caldera.devices.volcano_vgpu import VOLCANO_VGPU

NOW = 1_700_000_000.7
Z100 = "DCU-Z100"
A100 = "NVIDIA-NVIDIA A100-SXM4-40GB"

# --- Hygon DCU ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "text", "cards"),
    [
        (
            "HAMi's test fixture: nine fields, the mode kept as written",
            "test-0,1,1024,100,DCU,0,true,0,test:",
            [Card("test-0", 1, 1024, 100, "DCU", True, 0, 0, "test")],
        ),
        (
            "what Hygon's device plugin writes, two cards",
            "DCU-a,4,65520,100,DCU-Z100,0,true,0,hami:DCU-b,4,65520,100,DCU-Z100,1,false,1,hami:",
            [
                Card("DCU-a", 4, 65520, 100, Z100, True, 0, 0, "hami"),
                Card("DCU-b", 4, 65520, 100, Z100, False, 1, 1, "hami"),
            ],
        ),
        (
            "seven fields: index 0 and hami-core",
            "DCU-a,4,16384,100,DCU-Z100,1,true:",
            [Card("DCU-a", 4, 16384, 100, Z100, True, 0, 1, "hami-core")],
        ),
        ("nothing registered", "", []),
    ],
)
def test_a_dcu_node_registration_reads_as_hamis_colon_form(
    case: str, text: str, cards: list[Card]
) -> None:
    assert HYGON_DCU.read_cards(text) == cards, case


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[{"id":"DCU-a"}]', "expected 7 or 9 comma-separated fields"),
        ("DCU-a,4,16384,100,DCU-Z100:", "expected 7 or 9 comma-separated fields, not 5"),
        ("DCU-a,four,16384,100,DCU-Z100,0,true:", "device 0 count: not an integer"),
        ("DCU-a,4,16384,100,DCU-Z100,0,yes:", "device 0 health: expected true or false"),
    ],
)
def test_an_unreadable_dcu_registration_says_where(text: str, says: str) -> None:
    with pytest.raises(RegistrationError) as caught:
        HYGON_DCU.read_cards(text)
    assert says in str(caught.value)


N, DMEM, DCORES = "hygon.com/dcunum", "hygon.com/dcumem", "hygon.com/dcucores"


def dcu(nums: int, memreq: int = 0, cores: int = 100) -> CardRequest:
    return CardRequest("DCU", nums, memreq, 100 if memreq == 0 else UNSET_PERCENTAGE, cores)


@pytest.mark.parametrize(
    ("case", "limits", "requests", "defaults", "expected"),
    [
        ("no count, no request", {DMEM: 1000}, {}, DeviceDefaults(), None),
        ("a zero count, no request", {N: 0}, {}, DeviceDefaults(), None),
        ("a fractional count, no request", {N: 1.5}, {}, DeviceDefaults(), None),
        ("a count alone takes the whole card, compute too", {N: 1}, {}, DeviceDefaults(), dcu(1)),
        (
            "configured default memory and cores do not apply",
            {N: 1},
            {},
            DeviceDefaults(default_memory=2048, default_cores=10),
            dcu(1),
        ),
        ("memory and cores as asked", {N: 2, DMEM: 3000, DCORES: 30}, {}, None, dcu(2, 3000, 30)),
        ("zero cores are zero", {N: 1, DMEM: 3000, DCORES: 0}, {}, None, dcu(1, 3000, 0)),
        (
            "limits first, then requests",
            {N: 1, DMEM: 1000},
            {DMEM: 2000, DCORES: 20},
            None,
            dcu(1, 1000, 20),
        ),
        ("requests alone", {}, {N: 1, DMEM: 500}, None, dcu(1, 500)),
        (
            "the memory factor multiplies",
            {N: 1, DMEM: 3000},
            {},
            DeviceDefaults(memory_factor=2),
            dcu(1, 6000),
        ),
        (
            "a memory factor of 0 is not applied",
            {N: 1, DMEM: 3000},
            {},
            DeviceDefaults(memory_factor=0),
            dcu(1, 3000),
        ),
        ("a negative memory empties the request", {N: 1, DMEM: -1}, {}, None, None),
        ("a fractional memory empties the request", {N: 1, DMEM: 1.5}, {}, None, None),
        ("cores above 100 empty the request", {N: 1, DCORES: 101}, {}, None, None),
        ("negative cores empty the request", {N: 1, DCORES: -1}, {}, None, None),
        (
            "a memory past int32 once multiplied empties the request",
            {N: 1, DMEM: 2**30},
            {},
            DeviceDefaults(memory_factor=2),
            None,
        ),
    ],
)
def test_a_containers_dcu_request_resolves_as_hamis_hygon_device_does(
    case: str,
    limits: dict[str, float],
    requests: dict[str, float],
    defaults: DeviceDefaults | None,
    expected: CardRequest | None,
) -> None:
    got = HYGON_DCU.read_request(limits, requests, defaults or DeviceDefaults())
    assert got == expected, case


def test_a_dcu_request_with_no_memory_takes_the_whole_cards_memory() -> None:
    card = Card("DCU-a", 4, 16384, 100, Z100, True)
    assert dcu(1).memory_on(card) == 16384
    assert dcu(1, 2000).memory_on(card) == 2000


def test_a_pods_annotations_choose_its_dcus() -> None:
    opts = HYGON_DCU.read_options(
        {
            "hygon.com/use-dcutype": "Z100, K100,",
            "hygon.com/nouse-dcutype": "Z100L",
            "hygon.com/use-gpuuuid": "DCU-a,DCU-b",
            "hygon.com/nouse-gpuuuid": " DCU-c ",
            "hami.io/gpu-scheduler-policy": "binpack",
            "hami.io/device-scoring-weights": "slot=1,core=0,memory=3",
            "nvidia.com/numa-bind": "true",
            "nvidia.com/vgpu-mode": "mig",
            "nvidia.com/use-gputype": "A100",
        },
        "spread",
        frozenset({"DCU-z"}),
    )
    assert (opts.use_types, opts.nouse_types) == (("Z100", "K100"), ("Z100L",))
    assert (opts.use_uuids, opts.nouse_uuids) == (
        frozenset({"DCU-a", "DCU-b"}),
        frozenset({"DCU-c"}),
    )
    assert (opts.gpu_policy, opts.weights, opts.cordoned) == (
        "binpack",
        (1, 0, 3),
        frozenset({"DCU-z"}),
    )
    assert (opts.numa_bind, opts.vgpu_mode) == (False, None)
    plain = HYGON_DCU.read_options({}, "spread", frozenset())
    assert (plain.gpu_policy, plain.use_types, plain.weights) == ("spread", (), (1, 1, 1))


def test_a_dcu_pod_is_bound_with_the_dcu_allocation_keys_and_hamis_others() -> None:
    grant = Grant("DCU-a", "DCU", 2048, 100)
    assert HYGON_DCU.bind_annotations("node-1", [[grant], []], NOW) == {
        "hami.io/vgpu-node": "node-1",
        "hami.io/vgpu-time": "1700000000",
        "hami.io/dcu-devices-to-allocate": "DCU-a,DCU,2048,100:;;",
        "hami.io/dcu-devices-allocated": "DCU-a,DCU,2048,100:;;",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
    }
    assert HYGON_DCU.decode("test1,DCU,2048,1:;") == [[Grant("test1", "DCU", 2048, 1)]]
    assert HYGON_DCU.keys.lock == "hami.io/mutex.lock"


def test_the_dcu_vendor_names_its_resources_and_quota() -> None:
    assert (HYGON_DCU.name, HYGON_DCU.register_annotation, HYGON_DCU.score_annotation) == (
        "DCU",
        "hami.io/node-dcu-register",
        "",
    )
    assert HYGON_DCU.resources == {N, DMEM, DCORES}
    assert (HYGON_DCU.quota_memory, HYGON_DCU.quota_cores) == (DMEM, DCORES)


# --- Volcano vGPU ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "text", "cards"),
    [
        (
            "what the device plugin writes: compute 100, NUMA 0, the index its position",
            f"GPU-a,10,40960,{A100},true,hami-core:GPU-b,10,40960,{A100},false,mig:",
            [
                Card("GPU-a", 10, 40960, 100, A100, True, 0, 0, "hami-core"),
                Card("GPU-b", 10, 40960, 100, A100, False, 1, 0, "mig"),
            ],
        ),
        (
            "any mode but mig is hami-core; fields past the sixth are ignored",
            "GPU-a,4,8000,NVIDIA-T4,true,mps,extra:",
            [Card("GPU-a", 4, 8000, 100, "NVIDIA-T4", True, 0, 0, "hami-core")],
        ),
        ("no colon: no cards", "GPU-a,4,8000,NVIDIA-T4,true,hami-core", []),
        ("nothing registered", "", []),
    ],
)
def test_a_volcano_node_registration_reads_as_volcanos_scheduler_reads_it(
    case: str, text: str, cards: list[Card]
) -> None:
    assert VOLCANO_VGPU.read_cards(text) == cards, case


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("GPU-a,4,8000,NVIDIA-T4,true:", "device 0: expected uuid,count,devmem,type,health,mode"),
        ("GPU-a,4,8000,T4,true,hami-core:GPU-b,4:", "device 1: expected uuid,count,devmem"),
        ("GPU-a,4,8000,NVIDIA-T4,true:", "'GPU-a,4,8000,NVIDIA-T4,true'"),
        ("GPU-a,four,8000,NVIDIA-T4,true,hami-core:", "device 0 count: not an integer"),
        ("GPU-a,4,8000,NVIDIA-T4,healthy,hami-core:", "device 0 health: expected true or false"),
    ],
)
def test_an_unreadable_volcano_registration_names_the_record(text: str, says: str) -> None:
    with pytest.raises(RegistrationError) as caught:
        VOLCANO_VGPU.read_cards(text)
    assert says in str(caught.value)


V, VMEM, VPCT, VCORES = (
    "volcano.sh/vgpu-number",
    "volcano.sh/vgpu-memory",
    "volcano.sh/vgpu-memory-percentage",
    "volcano.sh/vgpu-cores",
)


def vgpu(nums: int, memreq: int = 0, pct: int = UNSET_PERCENTAGE, cores: int = 0) -> CardRequest:
    return CardRequest("NVIDIA", nums, memreq, pct, cores)


@pytest.mark.parametrize(
    ("case", "limits", "requests", "expected"),
    [
        ("no count and no memory limit: no request", {VCORES: 50}, {VMEM: 1000}, None),
        ("a zero count: no request", {V: 0}, {}, None),
        ("a count alone takes the whole card", {V: 1}, {}, vgpu(1, pct=100)),
        ("a memory limit alone asks for one card", {VMEM: 3000}, {}, vgpu(1, 3000)),
        ("memory and cores as asked", {V: 2, VMEM: 3000, VCORES: 30}, {}, vgpu(2, 3000, cores=30)),
        ("limits first, then requests", {V: 1, VMEM: 1000}, {VMEM: 2000}, vgpu(1, 1000)),
        ("requests alone", {}, {V: 2, VCORES: 20}, vgpu(2, pct=100, cores=20)),
        ("a percentage", {V: 1, VPCT: 25}, {}, vgpu(1, pct=25)),
        ("a percentage above 100 is 100", {V: 1, VPCT: 150}, {}, vgpu(1, pct=100)),
        ("a zero percentage is unset: the whole card", {V: 1, VPCT: 0}, {}, vgpu(1, pct=100)),
        ("a negative memory empties the request", {V: 1, VMEM: -1}, {}, None),
        ("a fractional memory empties the request", {V: 1, VMEM: 1.5}, {}, None),
    ],
)
def test_a_containers_vgpu_request_resolves_as_volcano_resolves_it(
    case: str,
    limits: dict[str, float],
    requests: dict[str, float],
    expected: CardRequest | None,
) -> None:
    assert VOLCANO_VGPU.read_request(limits, requests, DeviceDefaults()) == expected, case


def test_hamis_configured_defaults_do_not_reach_a_volcano_request() -> None:
    defaults = DeviceDefaults(default_memory=2048, default_cores=10, memory_factor=4)
    assert VOLCANO_VGPU.read_request({V: 1}, {}, defaults) == vgpu(1, pct=100)
    assert VOLCANO_VGPU.read_request({V: 1, VMEM: 1000}, {}, defaults) == vgpu(1, 1000)


def test_a_pods_annotations_choose_its_vgpus() -> None:
    opts = VOLCANO_VGPU.read_options(
        {
            "nvidia.com/use-gputype": "A100, H100,",
            "nvidia.com/nouse-gputype": "MIG",
            "volcano.sh/vgpu-use-gpuuuid": "GPU-a,GPU-b",
            "volcano.sh/vgpu-nouse-gpuuuid": " GPU-c ",
            "volcano.sh/vgpu-mode": "mig",
            "hami.io/gpu-scheduler-policy": "binpack",
            "nvidia.com/use-gpuuuid": "GPU-x",
        },
        "spread",
        frozenset({"GPU-z"}),
    )
    assert (opts.use_types, opts.nouse_types) == (("A100", "H100"), ())  # use wins
    assert (opts.use_uuids, opts.nouse_uuids) == (
        frozenset({"GPU-a", "GPU-b"}),
        frozenset({"GPU-c"}),
    )
    assert (opts.vgpu_mode, opts.gpu_policy, opts.cordoned) == (
        "mig",
        "spread",
        frozenset({"GPU-z"}),
    )
    assert (opts.numa_bind, opts.weights) == (False, (1, 1, 1))
    deny = VOLCANO_VGPU.read_options({"nvidia.com/nouse-gputype": "T4"}, "binpack", frozenset())
    assert (deny.use_types, deny.nouse_types, deny.vgpu_mode) == ((), ("T4",), None)


def test_a_vgpu_pod_is_bound_with_volcanos_keys_and_an_aligned_allocation() -> None:
    one, two = Grant("GPU-a", "NVIDIA", 3000, 50), Grant("GPU-b", "NVIDIA", 40960, 0)
    text = "GPU-a,NVIDIA,3000,50:GPU-b,NVIDIA,40960,0:;;"
    assert VOLCANO_VGPU.bind_annotations("node-1", [[one, two], []], NOW) == {
        "volcano.sh/vgpu-node": "node-1",
        "volcano.sh/vgpu-time": "1700000000",
        "volcano.sh/devices-to-allocate": text,
        "volcano.sh/vgpu-ids-new": text,
        "volcano.sh/bind-phase": "allocating",
        "volcano.sh/bind-time": "1700000000",
    }
    assert VOLCANO_VGPU.decode(text) == [[one, two], []]
    assert VOLCANO_VGPU.keys.lock == "hamivgpu"


def test_the_vgpu_vendor_names_its_resources_and_quota() -> None:
    assert (VOLCANO_VGPU.name, VOLCANO_VGPU.register_annotation) == (
        "NVIDIA",
        "volcano.sh/node-vgpu-register",
    )
    assert VOLCANO_VGPU.resources == {V, VMEM, VPCT, VCORES}
    assert (VOLCANO_VGPU.quota_memory, VOLCANO_VGPU.quota_cores) == (VMEM, VCORES)


@pytest.mark.parametrize("vendor", [HYGON_DCU, VOLCANO_VGPU], ids=["hygon", "volcano"])
def test_every_vendor_reads_no_request_from_a_container_without_its_resources(
    vendor: Vendor,
) -> None:
    plain = {"cpu": 1.0, "nvidia.com/gpu": 1.0, "nvidia.com/gpumem": 1000.0}
    assert vendor.read_request(plain, plain, DeviceDefaults()) is None


def test_the_guides_vendor_table_names_every_dialects_switch_and_count() -> None:
    """The vendor table of the devices guide is what users read to turn a vendor on: every
    ``deviceshare.Vendors`` word, and every dialect's count (a per-card-type count as its
    ``<type>`` pattern), are in it."""
    from pathlib import Path

    from caldera.devices.vendors import FAMILIES, VENDORS

    readme = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "devices.md").read_text()
    table = readme[readme.index("| vendor | `deviceshare.Vendors` |") :]
    table = table[: table.index("\n\n")]
    for family in FAMILIES:
        assert f"| `{family}` |" in table, family
    assert "| `deviceshare.AscendHAMiVNPUEnable` instead |" in table
    patterns = {
        "ascend": "`huawei.com/<type>`",
        "volcano-vnpu": "`huawei.com/<type>`",
        "iluvatar": "`iluvatar.ai/<chip>-vgpu`",
    }
    for vendor in VENDORS:
        assert patterns.get(vendor.family, f"`{vendor.count_resource}`") in table, vendor.name
