"""NVIDIA's side of the HAMi protocol, case by case from ../shared/reference/hami.md §1–§3."""

from __future__ import annotations

import pytest

from caldera.devices.hami import cordoned, decode_allocation, encode_allocation, registered_cards
from caldera.devices.model import (
    UNSET_PERCENTAGE,
    Card,
    CardRequest,
    DeviceDefaults,
    Grant,
    RegistrationError,
)
from caldera.devices.nvidia import container_request, pair_scores

T4 = "NVIDIA-Tesla T4"
TWO_T4 = (
    '[{"id":"GPU-5a1c","count":10,"devmem":15360,"devcore":100,"type":"NVIDIA-Tesla T4",'
    '"mode":"hami-core","health":true},{"id":"GPU-8b2d","index":1,"count":10,"devmem":15360,'
    '"devcore":100,"type":"NVIDIA-Tesla T4","numa":1,"mode":"hami-core","health":true}]'
)


@pytest.mark.parametrize(
    ("case", "text", "cards"),
    [
        (
            "the device plugin's JSON, zero index and NUMA left out",
            TWO_T4,
            [
                Card("GPU-5a1c", 10, 15360, 100, T4, True, 0, 0, "hami-core"),
                Card("GPU-8b2d", 10, 15360, 100, T4, True, 1, 1, "hami-core"),
            ],
        ),
        (
            "HAMi's test fixture form",
            (
                '[{"id":"GPU-0","count":5,"devmem":8192,"devcore":100,"type":"NVIDIA-Tesla P4",'
                '"numa":0,"health":true,"index":0}]'
            ),
            [Card("GPU-0", 5, 8192, 100, "NVIDIA-Tesla P4", True, 0, 0, "")],
        ),
        (
            "a missing health means unhealthy; keys match case-insensitively; unknown keys ignored",
            '[{"ID":"GPU-1","Count":10,"DevMem":1024,"devcore":100,"type":"NVIDIA-A10","extra":1}]',
            [Card("GPU-1", 10, 1024, 100, "NVIDIA-A10", False, 0, 0, "")],
        ),
        ("an empty array: no GPU on the node", "[]", []),
        (
            "the legacy colon form with index and mode",
            (
                "GPU-aaa,10,15360,100,NVIDIA-Tesla T4,0,true,0,hami-core:"
                "GPU-bbb,10,15360,100,NVIDIA-Tesla T4,1,true,1,mps:"
            ),
            [
                Card("GPU-aaa", 10, 15360, 100, T4, True, 0, 0, "hami-core"),
                Card("GPU-bbb", 10, 15360, 100, T4, True, 1, 1, "mps"),
            ],
        ),
        (
            "the legacy seven-field form: index 0 and hami-core",
            "GPU-aaa,4,8000,100,NVIDIA-A100,1,false:",
            [Card("GPU-aaa", 4, 8000, 100, "NVIDIA-A100", False, 0, 1, "hami-core")],
        ),
    ],
)
def test_a_node_registration_reads_as_hamis_scheduler_reads_it(
    case: str, text: str, cards: list[Card]
) -> None:
    assert registered_cards(text) == cards, case


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[{", "not valid JSON"),
        ('{"id": "GPU-0"}', "expected a JSON array"),
        ('[{"id": "GPU-0", "count": "ten"}]', "[0].count: expected an integer, got 'ten'"),
        ('[{"id": "GPU-0", "health": "yes"}]', "[0].health: expected true or false"),
        ('[{"id": "GPU-0", "index": -1}]', "[0].index: expected an integer"),
        ("GPU-a,10,15360,100:", "expected 7 or 9 comma-separated fields, not 4"),
        ("GPU-a,ten,15360,100,T4,0,true:", "device 0 count: not an integer: 'ten'"),
        ("GPU-a,10,15360,100,T4,0,maybe:", "device 0 health: expected true or false"),
    ],
)
def test_an_unreadable_registration_says_where(text: str, says: str) -> None:
    with pytest.raises(RegistrationError, match=None) as caught:
        registered_cards(text)
    assert says in str(caught.value)


def req(nums: int, memreq: int = 0, pct: int = UNSET_PERCENTAGE, cores: int = 0) -> CardRequest:
    return CardRequest("NVIDIA", nums, memreq, pct, cores)


G, MEM, PCT, CORES = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
)


@pytest.mark.parametrize(
    ("case", "limits", "requests", "defaults", "expected"),
    [
        ("no card count, no request", {MEM: 1000}, {}, DeviceDefaults(), None),
        ("a count alone takes the whole card", {G: 1}, {}, DeviceDefaults(), req(1, pct=100)),
        (
            "memory and cores as asked",
            {G: 2, MEM: 3000, CORES: 30},
            {},
            DeviceDefaults(),
            req(2, 3000, cores=30),
        ),
        (
            "the memory factor multiplies",
            {G: 1, MEM: 3000},
            {},
            DeviceDefaults(memory_factor=2),
            req(1, 6000),
        ),
        ("a percentage above 100 is 100", {G: 1, PCT: 150}, {}, DeviceDefaults(), req(1, pct=100)),
        ("a percentage", {G: 1, PCT: 25}, {}, DeviceDefaults(), req(1, pct=25)),
        (
            "a zero percentage is ignored: the whole card",
            {G: 1, PCT: 0},
            {},
            DeviceDefaults(),
            req(1, pct=100),
        ),
        (
            "the default memory replaces the whole card",
            {G: 1},
            {},
            DeviceDefaults(default_memory=2048),
            req(1, 2048),
        ),
        (
            "default cores when none are asked",
            {G: 1, MEM: 100},
            {},
            DeviceDefaults(default_cores=10),
            req(1, 100, cores=10),
        ),
        (
            "limits first, then requests",
            {G: 1, MEM: 1000},
            {MEM: 2000, CORES: 20},
            DeviceDefaults(),
            req(1, 1000, cores=20),
        ),
        ("requests alone", {}, {G: 1, MEM: 500}, DeviceDefaults(), req(1, 500)),
        ("a negative memory empties the request", {G: 1, MEM: -1}, {}, DeviceDefaults(), None),
        ("a fractional memory empties the request", {G: 1, MEM: 1.5}, {}, DeviceDefaults(), None),
    ],
)
def test_a_containers_request_resolves_as_hami_resolves_it(
    case: str,
    limits: dict[str, float],
    requests: dict[str, float],
    defaults: DeviceDefaults,
    expected: CardRequest | None,
) -> None:
    assert container_request(limits, requests, defaults) == expected, case


def test_memory_is_the_request_or_a_share_of_the_candidate_card() -> None:
    card = Card("GPU-0", 10, 15360, 100, T4, True)
    assert req(1, pct=50).memory_on(card) == 7680
    assert req(1, pct=33).memory_on(Card("GPU-1", 10, 1001, 100, T4, True)) == 330  # truncated
    assert req(1, 3000).memory_on(card) == 3000


ONE = Grant("GPU-uuid1", "NVIDIA", 1000, 30)
TWO = Grant("GPU-uuid2", "NVIDIA", 1000, 30)


@pytest.mark.parametrize(
    ("case", "containers", "text"),
    [
        ("one container, one card", [[ONE]], "GPU-uuid1,NVIDIA,1000,30:;"),
        (
            "one container, two cards",
            [[TWO, ONE]],
            "GPU-uuid2,NVIDIA,1000,30:GPU-uuid1,NVIDIA,1000,30:;",
        ),
        (
            "three containers, only the middle one has a card",
            [[], [ONE], []],
            ";GPU-uuid1,NVIDIA,1000,30:;;",
        ),
        (
            "init (none), init (card), app (card)",
            [[], [ONE], [ONE]],
            ";GPU-uuid1,NVIDIA,1000,30:;GPU-uuid1,NVIDIA,1000,30:;",
        ),
    ],
)
def test_the_allocation_string_is_written_and_read_back_aligned(
    case: str, containers: list[list[Grant]], text: str
) -> None:
    assert encode_allocation(containers) == text, case
    assert decode_allocation(text) == containers, case


def test_hamis_fixture_decodes_and_entries_without_fields_are_skipped() -> None:
    assert decode_allocation("nvidia-device-0,NVIDIA,2000,1:;") == [
        [Grant("nvidia-device-0", "NVIDIA", 2000, 1)]
    ]
    assert decode_allocation("junk:GPU-a,NVIDIA,10,0:;") == [[Grant("GPU-a", "NVIDIA", 10, 0)]]
    with pytest.raises(ValueError, match="memory and cores must be integers"):
        decode_allocation("GPU-a,NVIDIA,ten,0:;")
    with pytest.raises(ValueError, match="out of range"):
        decode_allocation(f"GPU-a,NVIDIA,{2**31},0:;")


def test_cordoned_cards_and_pair_scores_are_read_from_the_node() -> None:
    assert cordoned({"hami.io/device-cordon": " GPU-a , GPU-b,,"}) == {"GPU-a", "GPU-b"}
    assert cordoned({}) == frozenset()
    scores = pair_scores('[{"uuid":"GPU-a","score":{"GPU-b":60,"GPU-c":100}},{"bad":1}]')
    assert scores == {"GPU-a": {"GPU-b": 60, "GPU-c": 100}}


def test_a_pods_annotations_choose_its_cards() -> None:
    from caldera.devices.hami import node_policy
    from caldera.devices.nvidia import pod_options

    opts = pod_options(
        {
            "nvidia.com/use-gputype": "A100, H100,",
            "nvidia.com/nouse-gputype": "MIG",
            "nvidia.com/use-gpuuuid": "GPU-a,GPU-b",
            "nvidia.com/nouse-gpuuuid": " GPU-c ",
            "nvidia.com/vgpu-mode": "hami-core",
            "nvidia.com/numa-bind": "true",
            "hami.io/gpu-scheduler-policy": "binpack",
            "hami.io/device-scoring-weights": "slot=1,core=0,memory=3",
        },
        gpu_policy="spread",
        cordon=frozenset({"GPU-z"}),
    )
    assert (opts.use_types, opts.nouse_types) == (("A100", "H100"), ("MIG",))
    assert (opts.use_uuids, opts.nouse_uuids) == (
        frozenset({"GPU-a", "GPU-b"}),
        frozenset({"GPU-c"}),
    )
    assert (opts.vgpu_mode, opts.numa_bind, opts.gpu_policy) == ("hami-core", True, "binpack")
    assert (opts.weights, opts.cordoned) == ((1, 0, 3), frozenset({"GPU-z"}))
    plain = pod_options({}, gpu_policy="spread")
    assert (plain.gpu_policy, plain.numa_bind, plain.weights, plain.vgpu_mode) == (
        "spread",
        False,
        (1, 1, 1),
        None,
    )
    assert node_policy({"hami.io/node-scheduler-policy": "spread"}, "binpack") == "spread"
    assert node_policy({}, "binpack") == "binpack"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("slot=1,core=1", "name slot, core and memory"),
        ("slot=1,core=1,memory=x", "memory is not an integer"),
        ("slot=1,core=-1,memory=1", "core must not be negative"),
        ("slot=0,core=0,memory=0", "at least one weight must be positive"),
        ("slot=1,core=1,mem=1", "expected slot=N,core=N,memory=N"),
    ],
)
def test_invalid_scoring_weights_fail_the_pod_with_the_reason(raw: str, says: str) -> None:
    from caldera.devices.hami import scoring_weights

    with pytest.raises(ValueError, match=says):
        scoring_weights(raw)
