"""NVIDIA MIG the HAMi way: tables after HAMi's ``mig_topology_test.go``, ``device_test.go`` (the
MIG cases of ``Fit``) and ``mig_allocations.go``."""

from __future__ import annotations

import json

import pytest

from caldera.devices import mig
from caldera.devices.fit import CardUse, FitOptions, fit_node, pod_usage
from caldera.devices.model import Card, CardRequest, Grant, MigProfile
from caldera.devices.nvidia import NVIDIA

A100 = (
    MigProfile("1g.5gb", 4864, 14, 1, tuple((s, 1) for s in range(7))),
    MigProfile("2g.10gb", 9856, 28, 2, ((0, 2), (2, 2), (4, 2))),
    MigProfile("3g.20gb", 19968, 42, 3, ((0, 4), (4, 4))),
)
"""The A100-40GB profiles of ``TestCanPlaceMigProfilesA100``, with NVML's memory and compute."""


def test_select_mig_placement_uses_balanced_packing() -> None:
    # TestSelectMigPlacementUsesBalancedPacking: 1g and 3g from the high end, 2g from the low
    by_name = {p.name: p for p in A100}
    occupied: list[tuple[int, int]] = []
    for name, start in (("3g.20gb", 4), ("2g.10gb", 0), ("1g.5gb", 3), ("1g.5gb", 2)):
        got = mig.place(by_name[name], occupied)
        assert got is not None and got[0] == start, name
        occupied.append(got)


@pytest.mark.parametrize(
    ("occupied", "memory", "expected"),
    [
        pytest.param([], 4000, ("1g.5gb", (6, 1)), id="the smallest profile that holds it"),
        pytest.param([], 9000, ("2g.10gb", (0, 2)), id="memory above 1g: a 2g instance"),
        pytest.param(
            [(4, 4)], 15000, ("3g.20gb", (0, 4)), id="the free 3g placement when one is taken"
        ),
        pytest.param(
            [(0, 4), (4, 4)], 1000, None, id="no profile overlaps two active 3g placements"
        ),
        pytest.param(
            [(0, 2), (2, 2), (4, 2)],
            4000,
            ("1g.5gb", (6, 1)),
            id="three 2g instances leave one slice for a 1g",
        ),
        pytest.param([], 30000, None, id="no profile holds more than the card"),
    ],
)
def test_select_mig_candidate(
    occupied: list[tuple[int, int]], memory: int, expected: tuple[str, tuple[int, int]] | None
) -> None:
    got = mig.select(A100, occupied, memory)
    assert (None if got is None else (got[0].name, got[1])) == expected


def a100(uuid: str = "GPU-m") -> Card:
    return Card(uuid, 7, 40960, 100, "NVIDIA A100-SXM4-40GB", True, mode="mig", mig_profiles=A100)


def fit(
    cards: list[Card], uses: list[CardUse], nums: int, memory: int
) -> tuple[list[tuple[str, tuple[str, int, int] | None]] | None, str]:
    request = CardRequest("NVIDIA", nums, memory, 101, 0)
    got = fit_node(cards, uses, [(False, request)], FitOptions(), "NVIDIA")
    if got.grants is None:
        return None, got.reason
    return [(g.uuid, g.mig) for g in got.grants[0]], ""


def test_a_container_gets_an_instance_charged_its_profile() -> None:
    # AddResourceUsage: usedmem and usedcores become the profile's
    request = CardRequest("NVIDIA", 1, 9000, 101, 0)
    got = fit_node([a100()], [CardUse()], [(False, request)], FitOptions(), "NVIDIA")
    assert got.grants == [[Grant("GPU-m", "NVIDIA", 9856, 28, ("2g.10gb", 0, 2))]]


def test_one_mig_card_holds_several_instances_of_one_container() -> None:
    # Fit's ``i++`` on a MIG card: the same card is tried again; isMIGRequest: two instances
    # asked of a node with one card is not NodeInsufficientDevice
    assert fit([a100()], [CardUse()], 2, 4000) == (
        [("GPU-m", ("1g.5gb", 6, 1)), ("GPU-m", ("1g.5gb", 5, 1))],
        "",
    )


def test_a_full_mig_card_says_its_topology_is_infeasible() -> None:
    full = CardUse(2, 39936, 84, ((0, 4), (4, 4)))
    assert fit([a100()], [full], 1, 1000) == (None, "1/1 CardMigTopologyInfeasible")


def test_the_instances_a_pod_holds_are_charged_to_its_card() -> None:
    grants = [[Grant("GPU-m", "NVIDIA", 9856, 28, ("2g.10gb", 0, 2))]]
    assert pod_usage(0, grants) == {"GPU-m": CardUse(1, 9856, 28, ((0, 2),))}


def test_mig_allocations_are_written_and_read_back() -> None:
    grants = [[], [Grant("GPU-m", "NVIDIA", 9856, 28, ("2g.10gb", 0, 2))]]
    written = NVIDIA.bind_annotations("n1", grants, 1_800_000_000.0)[mig.ALLOCATIONS_ANNOTATION]
    assert json.loads(written) == [
        {
            "containerIndex": 1,
            "deviceIndex": 0,
            "gpuUUID": "GPU-m",
            "profile": "2g.10gb",
            "placement": {"start": 0, "size": 2},
        }
    ]
    assert mig.decode_allocations(written) == {"GPU-m": [(0, 2)]}
    assert mig.ALLOCATIONS_ANNOTATION not in NVIDIA.bind_annotations(
        "n1", [[Grant("GPU-a", "NVIDIA", 1000, 10)]], 1_800_000_000.0
    )


@pytest.mark.parametrize(
    ("items", "says"),
    [
        pytest.param(
            [{"containerIndex": 0, "deviceIndex": 0, "profile": "1g.5gb"}],
            "incomplete",
            id="DecodeMigAllocations: no GPU UUID",
        ),
        pytest.param(
            [
                {
                    "containerIndex": 0,
                    "deviceIndex": 0,
                    "gpuUUID": "GPU-m",
                    "profile": "1g.5gb",
                    "placement": {"start": 6, "size": 1},
                    "migUUID": "MIG-1",
                }
            ],
            "partial runtime identity",
            id="DecodeMigAllocations: a MIG UUID without its instance IDs",
        ),
        pytest.param(
            [
                {
                    "containerIndex": 0,
                    "deviceIndex": 0,
                    "gpuUUID": "GPU-m",
                    "profile": "1g.5gb",
                    "placement": {"start": s, "size": 1},
                }
                for s in (6, 5)
            ],
            "duplicate",
            id="DecodeMigAllocations: one container device twice",
        ),
        pytest.param(
            [
                {
                    "containerIndex": 0,
                    "deviceIndex": 0,
                    "gpuUUID": "GPU-m",
                    "profile": "1g.5gb",
                    "placement": [6, 1],
                }
            ],
            "incomplete",
            id="DecodeMigAllocations: a placement that is not an object (json.Unmarshal fails)",
        ),
    ],
)
def test_decode_mig_allocations_refuses_what_go_refuses(items: list[object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        mig.decode_allocations(json.dumps(items))


def test_the_registration_carries_each_cards_mig_profiles() -> None:
    text = json.dumps(
        [
            {
                "id": "GPU-m",
                "count": 7,
                "devmem": 40960,
                "devcore": 100,
                "type": "NVIDIA A100",
                "mode": "mig",
                "health": True,
                "migProfiles": [
                    {
                        "name": "3g.20gb",
                        "memoryMB": 19968,
                        "core": 42,
                        "sliceCount": 3,
                        "placements": [{"start": 0, "size": 4}, {"start": 4, "size": 4}],
                    }
                ],
            }
        ]
    )
    (card,) = NVIDIA.read_cards(text)
    assert card.mig_profiles == (MigProfile("3g.20gb", 19968, 42, 3, ((0, 4), (4, 4))),)
