"""Ascend NPUs end to end: HAMi's dialect through deviceshare (``deviceshare.VGPUEnable`` and
``deviceshare.AscendEnable``), from the node's registration to the annotations HAMi's Ascend
device plugin reads at bind."""

from __future__ import annotations

import json
from typing import Any

from test_deviceshare import deviceshare_policy

from builders import REGISTRY, Obj, binds, bound_with, node, pod, podgroup, policy, state_of
from caldera.simulate.explain import explain
from caldera.simulate.runner import Simulation, simulate

WORD = "Ascend910B3"
REGISTER = f"hami.io/node-register-{WORD}"


def npu(uuid: str, index: int, network: int) -> dict[str, Any]:
    """One 910B3 as HAMi's Ascend device plugin registers it (64 GiB, 20 AI cores)."""
    return {
        "ID": uuid,
        "Index": index,
        "Count": 4,
        "Devmem": 65536,
        "Devcore": 20,
        "Type": WORD,
        "Health": True,
        "CustomInfo": {"NetworkID": network},
    }


def npu_node(name: str, *npus: dict[str, Any], annotations: dict[str, str] | None = None) -> Obj:
    return node(
        name,
        cpu="32",
        memory="256Gi",
        annotations={REGISTER: json.dumps(list(npus)), **(annotations or {})},
    )


def asks(count: int, memory: int | None = None, cores: int | None = None) -> dict[str, str]:
    out = {f"huawei.com/{WORD}": str(count)}
    if memory is not None:
        out[f"huawei.com/{WORD}-memory"] = str(memory)
    if cores is not None:
        out[f"huawei.com/{WORD}-core"] = str(cores)
    return out


ASCEND_POLICY = deviceshare_policy(AscendEnable=True)


def run(*objects: Obj, cycles: int = 1) -> Simulation:
    return simulate(
        state_of(objects),
        policy(ASCEND_POLICY, REGISTRY),
        REGISTRY,
        scheduler_names=["volcano"],
        cycles=cycles,
    )


def test_a_hard_split_vnpu_is_bound_with_the_annotations_hamis_device_plugin_reads() -> None:
    sim = run(
        npu_node("n1", npu("NPU-0", 0, 0), npu("NPU-1", 1, 0)),
        pod("p", extra=asks(1, 16384, 5)),
    )
    assert binds(sim) == {"default/p": "n1"}
    notes = bound_with(sim, "p")
    allocated = notes[f"hami.io/{WORD}-devices-allocated"]
    assert allocated in (f"NPU-0,{WORD},16384,5:;", f"NPU-1,{WORD},16384,5:;")
    assert notes[f"hami.io/{WORD}-devices-to-allocate"] == allocated
    uuid = allocated.split(",")[0]
    runtime = [{"UUID": uuid, "temp": "vir05_1c_16g", "memory": 16384, "core": 5}]
    assert json.loads(notes[f"huawei.com/{WORD}"]) == runtime
    assert notes["hami.io/vgpu-node"] == "n1"
    assert notes["hami.io/bind-phase"] == "allocating"
    assert "predicate-time" in notes


def test_npus_are_shared_until_their_memory_runs_out_and_the_pod_says_why() -> None:
    sim = run(
        npu_node("n1", npu("NPU-0", 0, 0)),
        pod("a", extra=asks(1, 32768)),
        pod("b", extra=asks(1, 32768)),
        pod("c", extra=asks(1, 32768)),
    )
    placed = binds(sim)
    assert len(placed) == 2 and set(placed.values()) == {"n1"}
    (waiting,) = [c for c in sim.cycles[0].result.pod_conditions if c.name not in ("a", "b")]
    assert waiting.message == "0/1 nodes are available: 1 CardInsufficientMemory."


def test_a_soft_split_pod_needs_a_node_that_says_it_can() -> None:
    soft = {"huawei.com/vnpu-mode": "hami-core"}
    sim = run(
        npu_node("legacy", npu("NPU-0", 0, 0)),
        npu_node("soft", npu("NPU-9", 0, 0), annotations={"hami-vnpu-core": "true"}),
        pod("p", extra=asks(1, 4096, 30), annotations=soft),
    )
    assert binds(sim) == {"default/p": "soft"}
    runtime = json.loads(bound_with(sim, "p")[f"huawei.com/{WORD}"])
    assert runtime == [{"UUID": "NPU-9", "memory": 4096, "core": 30}]  # no template


def test_a_gang_of_npu_pods_starts_whole_or_not_at_all() -> None:
    sim = run(
        npu_node("n1", npu("NPU-0", 0, 0), npu("NPU-1", 1, 0)),
        podgroup("g", min_member=3),
        *(pod(f"g-{i}", group="g", extra=asks(1)) for i in range(3)),  # whole NPUs: two fit
    )
    assert binds(sim) == {}


def test_explain_names_the_npus_tried_and_hamis_reason_per_node() -> None:
    """``caldera explain`` on an NPU pod: the NPUs a fitting node would give, and on a full one
    HAMi's reason string (the NPUs tried and why each said no)."""
    objs = [
        npu_node("free", npu("NPU-f0", 0, 0)),
        npu_node("full", npu("NPU-x0", 0, 0), npu("NPU-x1", 1, 0)),
        pod("holder", node_name="full", extra=asks(2), annotations=_holding("full")),
        pod("p", extra=asks(1, 40000, 5)),
    ]
    ex = explain(
        state_of(objs),
        policy(ASCEND_POLICY, REGISTRY),
        REGISTRY,
        "p",
        scheduler_names=["volcano"],
    )
    nodes = {v.node: v for v in ex.nodes}
    assert nodes["free"].devices == "NPU-f0 (40000 MiB, 5 AI cores)"
    per_card = "NPU-x0: CardInsufficientMemory; NPU-x1: CardInsufficientMemory"
    assert nodes["full"].reasons == {"deviceshare": [f"2/2 CardInsufficientMemory ({per_card})"]}


def _holding(node_name: str) -> dict[str, str]:
    """What a pod holding both of ``node_name``'s NPUs whole carries (HAMi's bind keys)."""
    grants = f"NPU-x0,{WORD},65536,0:NPU-x1,{WORD},65536,0:;"
    return {"hami.io/vgpu-node": node_name, f"hami.io/{WORD}-devices-allocated": grants}


def test_without_ascend_enable_npus_stay_ordinary_extended_resources() -> None:
    """A cluster on Huawei's own device plugin: whole NPUs counted against node allocatable."""
    whole = node("n1", cpu="8", extra={f"huawei.com/{WORD}": "1"})
    sim = simulate(
        state_of([whole, pod("a", extra=asks(1)), pod("b", extra=asks(1))]),
        policy(deviceshare_policy(), REGISTRY),
        REGISTRY,
        scheduler_names=["volcano"],
    )
    assert len(binds(sim)) == 1  # one NPU in the cluster: the second pod waits for it
    (waiting,) = sim.cycles[0].result.pod_conditions
    assert f"insufficient huawei.com/{WORD}" in waiting.message  # counted as any resource


def test_a_later_session_counts_the_npus_bound_pods_hold() -> None:
    """The usage rebuild reads ``hami.io/<type>-devices-allocated`` of bound pods: a pod that
    arrives after the NPU was half taken gets the other half, and the third waits."""
    first = run(npu_node("n1", npu("NPU-0", 0, 0)), pod("a", extra=asks(1, 32768)))
    assert binds(first) == {"default/a": "n1"}
    state = first.state  # the simulator applied the bind and its annotations
    state.add(pod("b", extra=asks(1, 32768)))
    state.add(pod("c", extra=asks(1, 32768)))
    later = simulate(state, policy(ASCEND_POLICY, REGISTRY), REGISTRY, scheduler_names=["volcano"])
    assert len(binds(later)) == 1
