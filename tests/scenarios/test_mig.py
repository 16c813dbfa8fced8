"""NVIDIA MIG end to end, as HAMi's scheduler decides it: pods get instances of the profiles
the card's registration lists, placed where no instance sits, written to
``hami.io/vgpu-mig-allocations``, and read back by the next session."""

from __future__ import annotations

import json

from test_deviceshare import deviceshare_policy

from builders import REGISTRY, binds, card, gpu, gpu_node, pod, policy, state_of
from caldera.cache.state import ClusterState
from caldera.models.core import Node
from caldera.simulate.runner import Simulation, simulate

MIG = "hami.io/vgpu-mig-allocations"
PROFILES = [
    {
        "name": "1g.5gb",
        "memoryMB": 4864,
        "core": 14,
        "sliceCount": 1,
        "placements": [{"start": s, "size": 1} for s in range(7)],
    },
    {
        "name": "2g.10gb",
        "memoryMB": 9856,
        "core": 28,
        "sliceCount": 2,
        "placements": [{"start": s, "size": 2} for s in (0, 2, 4)],
    },
]


def mig_node() -> Node:
    a100 = card("GPU-m", 40960, count=7, model="NVIDIA A100-SXM4-40GB")
    return gpu_node("n1", {**a100, "mode": "mig", "migProfiles": PROFILES})


def run(state: ClusterState) -> Simulation:
    return simulate(
        state,
        policy(deviceshare_policy(), REGISTRY),
        REGISTRY,
        scheduler_names=["volcano"],
    )


def instances(sim: Simulation) -> dict[str, list[tuple[str, int]]]:
    out = {}
    for r in sim.cycles:
        for b in r.result.binds:
            items = json.loads(b.annotations[MIG])
            out[b.name] = [(i["profile"], i["placement"]["start"]) for i in items]
    return out


def test_pods_get_instances_placed_apart_and_the_next_session_reads_them_back() -> None:
    first = run(state_of([mig_node(), pod("a", extra=gpu(9000)), pod("b", extra=gpu(9000))]))
    assert binds(first) == {"default/a": "n1", "default/b": "n1"}
    assert sorted(instances(first).values()) == [[("2g.10gb", 0)], [("2g.10gb", 2)]]
    allocated = {
        b.name: b.annotations["hami.io/vgpu-devices-allocated"]
        for b in first.cycles[0].result.binds
    }
    assert set(allocated.values()) == {"GPU-m,NVIDIA,9856,28:;"}  # charged the profile
    state = first.state
    state.add(pod("c", extra=gpu(9000)))
    state.add(pod("d", extra=gpu(9000)))
    later = run(state)
    assert instances(later) == {"c": [("2g.10gb", 4)]}  # 0 and 2 are held
    (waiting,) = later.cycles[0].result.pod_conditions
    assert waiting.message == "0/1 nodes are available: 1 CardMigTopologyInfeasible."


def test_two_instances_asked_of_a_node_with_one_mig_card_are_both_placed_on_it() -> None:
    # isMIGRequest: not NodeInsufficientDevice; Fit's i++: the card is tried again
    sim = run(state_of([mig_node(), pod("two", extra=gpu(4000, n=2))]))
    assert binds(sim) == {"default/two": "n1"}
    assert instances(sim) == {"two": [("1g.5gb", 6), ("1g.5gb", 5)]}
