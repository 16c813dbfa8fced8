"""deviceshare: GPUs shared the HAMi way, from node registrations and pods in to binds out.

The expected cards, allocation strings and reasons follow ../shared/reference/hami.md: a node
registers its cards in ``hami.io/node-nvidia-register`` (§2.2); the pod's cards are chosen by
HAMi's walk (§4.2: the sorted cards tried from the last, so of two idle cards the last registered
wins, and under the default ``spread`` policy the least used card is tried first); the pod gets
the annotations of §3.1-§3.3, the allocation string ``<uuid>,NVIDIA,<mem>,<cores>:`` per card and
``;`` per container, init containers first (§3.2); usage is rebuilt from the running pods'
``hami.io/vgpu-devices-allocated`` (§3.5); a node the walk rejects contributes the walk's reasons
to the pod's pending message, kube-scheduler style (``0/<N> nodes are available: <n> <reason>.``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from builders import (
    REGISTER,
    REGISTRY,
    Obj,
    binds,
    card,
    gpu,
    gpu_node,
    node,
    pod,
    podgroup,
    policy,
    policy_text,
    priority_class,
    register,
    state_of,
    with_containers,
)
from caldera.api.task import NodeLock
from caldera.errors import ConfigError
from caldera.models.core import Pod, ResourceQuota
from caldera.plugins.deviceshare import DeviceShareArgs
from caldera.simulate.runner import Simulation, simulate

A100 = "NVIDIA A100-SXM4-40GB"
NODE_ANN = "hami.io/vgpu-node"
ALLOCATED = "hami.io/vgpu-devices-allocated"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
VOLCANO_REGISTER = "volcano.sh/node-vgpu-register"
VOLCANO_CARDS = (
    "GPU-v0,10,16000,NVIDIA-Tesla T4,true,hami-core:GPU-v1,10,16000,NVIDIA-Tesla T4,true,hami-core:"
)
"""Two idle T4s in Volcano's ``uuid,count,devmem,type,health,mode:`` form."""
NO_HEALTH = '[{"id":"GPU-a","count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-Tesla T4"}]'
"""A registration without ``health``: Go's omitempty leaves out ``false``."""


# -- builders ----------------------------------------------------------------------------------


def holder(
    name: str,
    node_name: str,
    allocated: str,
    *,
    phase: str = "Running",
    namespace: str = "default",
    assigned: bool = True,
    init_containers: Iterable[Mapping[str, Any]] = (),
) -> Pod:
    """A pod already on ``node_name`` that HAMi gave ``allocated`` (the rebuild reads it)."""
    notes = {ALLOCATED: allocated}
    if assigned:
        notes[NODE_ANN] = node_name
    return pod(
        name,
        namespace=namespace,
        node_name=node_name,
        phase=phase,
        cpu=None,
        memory=None,
        annotations=notes,
        init_containers=init_containers,
    )


def quota(namespace: str, hard: Mapping[str, str]) -> ResourceQuota:
    """A ResourceQuota of ``namespace`` (HAMi reads its ``limits.nvidia.com/gpumem`` …, §6)."""
    return ResourceQuota.model_validate(
        {"metadata": {"name": "gpu", "namespace": namespace}, "spec": {"hard": dict(hard)}}
    )


def deviceshare_policy(deviceshare: bool = True, **arguments: Any) -> str:
    """gang and priority, then predicates, proportion, nodeorder and (if asked) deviceshare with
    ``deviceshare.VGPUEnable: true`` and ``arguments`` (``GPUSchedulerPolicy="binpack"`` is
    ``deviceshare.GPUSchedulerPolicy: binpack``)."""
    second = ["predicates", "proportion", "nodeorder"]
    args: dict[str, Mapping[str, Any] | None] = {}
    if deviceshare:
        second.append("deviceshare")
        args["deviceshare"] = {
            "deviceshare.VGPUEnable": True,
            **{f"deviceshare.{k}": v for k, v in arguments.items()},
        }
    return policy_text("enqueue, allocate, backfill", ["priority", "gang"], second, arguments=args)


def run(
    objects: Iterable[Obj],
    *,
    quotas: Iterable[ResourceQuota] = (),
    cycles: int = 1,
    policy_yaml: str | None = None,
    **arguments: Any,
) -> Simulation:
    """The simulator on ``objects`` (and the namespace ``quotas``) under ``policy_yaml``, or
    else ``deviceshare_policy(**arguments)``."""
    state = state_of(objects)
    for q in quotas:
        state.add(q)
    text = policy_yaml if policy_yaml is not None else deviceshare_policy(**arguments)
    return simulate(
        state, policy(text, REGISTRY), REGISTRY, scheduler_names=["volcano"], cycles=cycles
    )


def pending(sim: Simulation, cycle: int = -1) -> dict[str, str]:
    """``{"ns/pod": message}`` of the Unschedulable pods of one cycle."""
    return {
        f"{c.namespace}/{c.name}": c.message
        for c in sim.cycles[cycle].result.pod_conditions
        if c.reason == "Unschedulable"
    }


def allocated(sim: Simulation, key: str) -> str:
    return sim.bind_annotations[key][ALLOCATED]


def stamp(sim: Simulation, cycle: int = 0) -> str:
    """The session time of a cycle as HAMi writes it (unix seconds)."""
    return str(int(sim.cycles[cycle].now))


# -- placement and annotations -----------------------------------------------------------------


def test_a_gpu_pod_gets_the_last_registered_of_two_idle_cards_and_hamis_annotations() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            pod("p", extra=gpu(3000, cores=30)),
        ]
    )
    assert binds(sim) == {"default/p": "n1"}
    now = stamp(sim)
    assert sim.bind_annotations["default/p"] == {
        "hami.io/vgpu-node": "n1",
        "hami.io/vgpu-time": now,
        "hami.io/vgpu-devices-to-allocate": "GPU-b,NVIDIA,3000,30:;",
        "hami.io/vgpu-devices-allocated": "GPU-b,NVIDIA,3000,30:;",
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": now,
    }


def test_spread_puts_the_next_pod_on_the_least_used_card() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            pod("p1", extra=gpu(3000)),
            pod("p2", extra=gpu(3000)),
        ]
    )
    assert allocated(sim, "default/p1") == "GPU-b,NVIDIA,3000,0:;"
    assert allocated(sim, "default/p2") == "GPU-a,NVIDIA,3000,0:;"


@pytest.mark.parametrize(
    ("arguments", "annotations"),
    [
        pytest.param(
            {"GPUSchedulerPolicy": "binpack"}, {}, id="binpack as the scheduler's GPU policy"
        ),
        pytest.param(
            {},
            {"hami.io/gpu-scheduler-policy": "binpack"},
            id="binpack asked by the pod's annotation",
        ),
    ],
)
def test_binpack_stacks_pods_on_the_most_used_card(
    arguments: dict[str, Any], annotations: dict[str, str]
) -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            *(pod(f"p{i}", extra=gpu(3000), annotations=annotations) for i in range(3)),
        ],
        **arguments,
    )
    assert [allocated(sim, f"default/p{i}") for i in range(3)] == ["GPU-b,NVIDIA,3000,0:;"] * 3


def test_two_cards_for_one_container_are_written_in_walk_order() -> None:
    sim = run([gpu_node("n1", card("GPU-a"), card("GPU-b")), pod("p", extra=gpu(2000, n=2))])
    assert allocated(sim, "default/p") == "GPU-b,NVIDIA,2000,0:GPU-a,NVIDIA,2000,0:;"


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param(gpu(percentage=50), "GPU-b,NVIDIA,8000,0:;", id="half of the card"),
        pytest.param(gpu(), "GPU-b,NVIDIA,16000,0:;", id="no memory asked: the whole card"),
        pytest.param(
            gpu(percentage=150), "GPU-b,NVIDIA,16000,0:;", id="a percentage above 100 is 100"
        ),
    ],
)
def test_memory_given_as_a_share_of_the_card(request_: dict[str, str], expected: str) -> None:
    sim = run([gpu_node("n1", card("GPU-a"), card("GPU-b")), pod("p", extra=request_)])
    assert allocated(sim, "default/p") == expected


def test_a_percentage_is_of_the_card_it_lands_on() -> None:
    # spread tries the least used card first: after p1 took 8000 of the 16000 card, p2 goes to
    # the idle 8000 card and takes half of *its* memory.
    sim = run(
        [
            gpu_node("n1", card("GPU-small", 8000), card("GPU-big", 16000)),
            pod("p1", extra=gpu(percentage=50)),
            pod("p2", extra=gpu(percentage=50)),
        ]
    )
    assert allocated(sim, "default/p1") == "GPU-big,NVIDIA,8000,0:;"
    assert allocated(sim, "default/p2") == "GPU-small,NVIDIA,4000,0:;"


def test_default_memory_and_memory_factor_arguments_shape_the_grant() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a")),
            pod("plain", extra=gpu()),
            pod("sized", extra=gpu(1500)),
        ],
        DefaultMemory=2000,
        MemoryFactor=2,
    )
    assert allocated(sim, "default/plain") == "GPU-a,NVIDIA,2000,0:;"
    assert allocated(sim, "default/sized") == "GPU-a,NVIDIA,3000,0:;"


def test_an_init_container_without_gpu_keeps_its_empty_entry_first() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a")),
            pod("p", extra=gpu(3000), init_containers=[{"name": "setup", "image": "busybox"}]),
        ]
    )
    assert allocated(sim, "default/p") == ";GPU-a,NVIDIA,3000,0:;"
    assert sim.bind_annotations["default/p"][TO_ALLOCATE] == ";GPU-a,NVIDIA,3000,0:;"


def test_two_gpu_containers_of_one_pod_see_each_others_cards() -> None:
    p = with_containers(pod("p"), gpu(10000), gpu(10000))
    sim = run([gpu_node("n1", card("GPU-a"), card("GPU-b")), p])
    assert allocated(sim, "default/p") == "GPU-b,NVIDIA,10000,0:;GPU-a,NVIDIA,10000,0:;"

    alone = run([gpu_node("n1", card("GPU-a")), with_containers(pod("p"), gpu(10000), gpu(10000))])
    assert binds(alone) == {}
    assert pending(alone) == {"default/p": "0/1 nodes are available: 1 CardInsufficientMemory."}


def test_the_node_lock_is_handed_to_the_binder_when_enabled() -> None:
    objs: list[Obj] = [gpu_node("n1", card("GPU-a")), pod("p", extra=gpu(3000)), pod("cpu-only")]

    def locks(sim: Simulation) -> dict[str, NodeLock | None]:
        return {b.name: b.node_lock for b in sim.cycles[0].result.binds}

    locked = run(objs, NodeLockEnable=True, NodeLockTimeout="90s")
    assert locks(locked) == {"p": NodeLock(90.0, "hami.io/mutex.lock"), "cpu-only": None}
    assert "default/cpu-only" not in locked.bind_annotations
    assert locks(run(objs, NodeLockEnable=True)) == {
        "p": NodeLock(300.0, "hami.io/mutex.lock"),
        "cpu-only": None,
    }
    assert locks(run(objs)) == {"p": None, "cpu-only": None}


def test_an_init_container_and_an_app_container_do_not_see_each_other() -> None:
    # init and app run one after the other: each gets 10000 of the one 16000 card, and the pod
    # holds their peak (10000), so 6000 is left for the next pod and nothing after it.
    init = [{"name": "init", "image": "busybox", "resources": {"requests": gpu(10000)}}]
    sim = run(
        [
            gpu_node("n1", card("GPU-a")),
            pod("p", extra=gpu(10000), init_containers=init),
            pod("q", extra=gpu(6000)),
            pod("r", extra=gpu(1)),
        ]
    )
    assert binds(sim) == {"default/p": "n1", "default/q": "n1"}
    assert allocated(sim, "default/p") == "GPU-a,NVIDIA,10000,0:;GPU-a,NVIDIA,10000,0:;"
    assert pending(sim) == {"default/r": "0/1 nodes are available: 1 CardInsufficientMemory."}


# -- why a node is not fit ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("first", extra=gpu(10000)),
                pod("p", extra=gpu(10000)),
            ],
            "CardInsufficientMemory",
            id="the memory left on the card is too little",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a", count=1)),
                pod("first", extra=gpu(1000)),
                pod("p", extra=gpu(1000)),
            ],
            "CardTimeSlicingExhausted",
            id="every sharing slot of the card is taken",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("first", extra=gpu(1000)),
                pod("p", extra=gpu(1000, cores=100)),
            ],
            "ExclusiveDeviceAllocateConflict",
            id="an exclusive pod on a card already shared",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("first", extra=gpu(1000, cores=100)),
                pod("p", extra=gpu(1000)),
            ],
            "CardComputeUnitsExhausted",
            id="a pod without cores on a card an exclusive pod holds",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("first", extra=gpu(1000, cores=70)),
                pod("p", extra=gpu(1000, cores=40)),
            ],
            "CardInsufficientCore",
            id="the cores left on the card are too few",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("p", extra=gpu(1000), annotations={"nvidia.com/use-gputype": "A100,H100"}),
            ],
            "CardTypeMismatch",
            id="use-gputype names no model of the node",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("p", extra=gpu(1000), annotations={"nvidia.com/nouse-gputype": "t4"}),
            ],
            "CardTypeMismatch",
            id="nouse-gputype names the node's model (case-insensitive)",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("p", extra=gpu(1000), annotations={"nvidia.com/vgpu-mode": "mig"}),
            ],
            "CardTypeMismatch",
            id="vgpu-mode asks for MIG on hami-core cards",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("p", extra=gpu(1000), annotations={"nvidia.com/use-gpuuuid": "GPU-z"}),
            ],
            "CardUuidMismatch",
            id="use-gpuuuid names no card of the node",
        ),
        pytest.param(
            [gpu_node("n1", card("GPU-a", health=False)), pod("p", extra=gpu(1000))],
            "CardNotHealth",
            id="the card is unhealthy",
        ),
        pytest.param(
            [
                node("n1", annotations={REGISTER: NO_HEALTH}),
                pod("p", extra=gpu(1000)),
            ],
            "CardNotHealth",
            id="a registration without health (Go's omitempty false)",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a"), annotations={"hami.io/device-cordon": "GPU-a"}),
                pod("p", extra=gpu(1000)),
            ],
            "CardCordoned",
            id="the card is cordoned",
        ),
        pytest.param(
            [gpu_node("n1", card("GPU-a")), pod("p", extra=gpu(1000, n=2))],
            "NodeInsufficientDevice",
            id="the pod asks more cards than the node has",
        ),
        pytest.param(
            [
                gpu_node("n1", card("GPU-a")),
                pod("p", extra=gpu(1000), annotations={"hami.io/gpu-scheduler-policy": "mutex"}),
                holder("h", "n1", "GPU-a,NVIDIA,1000,0:;"),
            ],
            "ExclusiveDeviceAllocateConflict",
            id="the mutex policy refuses a used card",
        ),
    ],
)
def test_a_pod_no_card_can_take_is_pending_with_hamis_reason(
    objects: list[Obj], reason: str
) -> None:
    sim = run(objects)
    assert "default/p" not in binds(sim)
    assert pending(sim)["default/p"] == f"0/1 nodes are available: 1 {reason}."


def test_invalid_scoring_weights_fail_the_pod_with_the_reason() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a")),
            pod("p", extra=gpu(1000), annotations={"hami.io/device-scoring-weights": "slot=1"}),
        ]
    )
    assert binds(sim) == {}
    assert pending(sim) == {
        "default/p": "0/1 nodes are available: hami.io/device-scoring-weights: "
        "name slot, core and memory, not 'slot=1'."
    }


def test_the_reasons_of_every_card_and_node_are_counted() -> None:
    # n1: one card too small for the second card of the pod; n2: unregistered.
    sim = run(
        [
            gpu_node("n1", card("GPU-a", 4000), card("GPU-b")),
            node("n2"),
            pod("p", extra=gpu(8000, n=2)),
        ]
    )
    assert pending(sim) == {
        "default/p": "0/2 nodes are available: 1 AllocatedCardsInsufficientRequest, "
        "1 CardInsufficientMemory, 1 NodeInsufficientDevice."
    }


def test_a_node_whose_kubelet_reports_no_gpu_has_no_healthy_card() -> None:
    # allocatable nvidia.com/gpu 0: the device plugin is gone and the registration is stale
    stale = node(
        "n1", extra={"nvidia.com/gpu": "0"}, annotations={REGISTER: register(card("GPU-a"))}
    )
    sim = run([stale, pod("p", extra=gpu(1000))])
    assert binds(sim) == {}
    assert pending(sim) == {"default/p": "0/1 nodes are available: 1 CardNotHealth."}


def test_a_cordoned_or_unhealthy_card_is_passed_over_for_the_other() -> None:
    sim = run(
        [
            gpu_node(
                "n1", card("GPU-a"), card("GPU-b"), annotations={"hami.io/device-cordon": "GPU-b"}
            ),
            gpu_node("n2", card("GPU-c"), card("GPU-d", health=False)),
            pod("p1", extra=gpu(1000), node_selector={"host": "n1"}),
            pod("p2", extra=gpu(1000), node_selector={"host": "n2"}),
        ]
    )
    assert allocated(sim, "default/p1") == "GPU-a,NVIDIA,1000,0:;"
    assert allocated(sim, "default/p2") == "GPU-c,NVIDIA,1000,0:;"


def test_use_gpuuuid_picks_the_named_card_over_the_tie_winner() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            pod("p", extra=gpu(1000), annotations={"nvidia.com/use-gpuuuid": "GPU-a"}),
        ]
    )
    assert allocated(sim, "default/p") == "GPU-a,NVIDIA,1000,0:;"


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        pytest.param(None, "GPU-a", id="default weights: the emptier card by memory"),
        pytest.param("slot=1,core=0,memory=0", "GPU-b", id="slots only: the card with fewer pods"),
        pytest.param("slot=1,core=1,memory=3", "GPU-a", id="memory weighted up"),
    ],
)
def test_the_pods_scoring_weights_decide_which_card_is_least_used(
    weights: str | None, expected: str
) -> None:
    # GPU-a: two pods, 1000 MiB; GPU-b: one pod, 8000 MiB. Under spread the lowest score wins.
    annotations = {} if weights is None else {"hami.io/device-scoring-weights": weights}
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            holder("h1", "n1", "GPU-a,NVIDIA,500,0:;"),
            holder("h2", "n1", "GPU-a,NVIDIA,500,0:;"),
            holder("h3", "n1", "GPU-b,NVIDIA,8000,0:;"),
            pod("p", extra=gpu(1000), annotations=annotations),
        ]
    )
    assert allocated(sim, "default/p") == f"{expected},NVIDIA,1000,0:;"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({}, "GPU-d,NVIDIA,2000,0:GPU-b,NVIDIA,2000,0:;", id="across NUMA nodes"),
        pytest.param(
            {"nvidia.com/numa-bind": "true"},
            "GPU-b,NVIDIA,2000,0:GPU-a,NVIDIA,2000,0:;",
            id="numa-bind: both cards on one NUMA node",
        ),
    ],
)
def test_numa_bind_takes_all_cards_from_one_numa_node(
    annotations: dict[str, str], expected: str
) -> None:
    # NUMA 0: GPU-a, GPU-b; NUMA 1: GPU-c (nearly full), GPU-d.
    cards = [card("GPU-a"), card("GPU-b"), card("GPU-c", numa=1), card("GPU-d", numa=1)]
    sim = run(
        [
            gpu_node("n1", *cards),
            holder("h", "n1", "GPU-c,NVIDIA,15000,0:;"),
            pod("p", extra=gpu(2000, n=2), annotations=annotations),
        ]
    )
    assert allocated(sim, "default/p") == expected


def pair_scores(links: Mapping[tuple[str, str], int]) -> str:
    """``hami.io/node-nvidia-score`` (§2.5) for symmetric ``links``."""
    out: dict[str, dict[str, int]] = {}
    for (a, b), score in links.items():
        out.setdefault(a, {})[b] = score
        out.setdefault(b, {})[a] = score
    return json.dumps([{"uuid": uuid, "score": score} for uuid, score in out.items()])


@pytest.mark.parametrize(
    ("links", "n", "spread", "topology"),
    [
        pytest.param(
            {("GPU-b", "GPU-c"): 100, ("GPU-a", "GPU-b"): 10, ("GPU-a", "GPU-c"): 10},
            1,
            "GPU-c,NVIDIA,1000,0:;",
            "GPU-a,NVIDIA,1000,0:;",
            id="one card: the worst connected",
        ),
        pytest.param(
            {("GPU-a", "GPU-b"): 100, ("GPU-b", "GPU-c"): 10, ("GPU-a", "GPU-c"): 10},
            2,
            "GPU-c,NVIDIA,1000,0:GPU-b,NVIDIA,1000,0:;",
            "GPU-b,NVIDIA,1000,0:GPU-a,NVIDIA,1000,0:;",
            id="two cards: the best connected pair",
        ),
    ],
)
def test_topology_aware_chooses_cards_by_their_links(
    links: dict[tuple[str, str], int], n: int, spread: str, topology: str
) -> None:
    def chosen(annotations: dict[str, str]) -> str:
        n1 = gpu_node(
            "n1",
            card("GPU-a"),
            card("GPU-b"),
            card("GPU-c"),
            annotations={"hami.io/node-nvidia-score": pair_scores(links)},
        )
        sim = run([n1, pod("p", extra=gpu(1000, n=n), annotations=annotations)])
        return allocated(sim, "default/p")

    assert chosen({}) == spread
    assert chosen({"hami.io/gpu-scheduler-policy": "topology-aware"}) == topology


def test_use_gputype_picks_the_node_with_that_model() -> None:
    sim = run(
        [
            gpu_node("t4", card("GPU-t4")),
            gpu_node("a100", card("GPU-a100", 40000, model=A100)),
            pod("p", extra=gpu(1000), annotations={"nvidia.com/use-gputype": "a100"}),
        ]
    )
    assert binds(sim) == {"default/p": "a100"}
    assert allocated(sim, "default/p") == "GPU-a100,NVIDIA,1000,0:;"


@pytest.mark.parametrize(
    ("nodes", "request_"),
    [
        pytest.param([node("n1")], gpu(1000), id="no node registers any card"),
        pytest.param(
            [gpu_node("n1", card("GPU-a"))],
            {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "1000"},
            id="a Volcano vGPU pod where nodes register only HAMi cards",
        ),
    ],
)
def test_a_gpu_pod_is_not_bound_where_no_node_registers_its_cards(
    nodes: list[Obj], request_: dict[str, str]
) -> None:
    sim = run([*nodes, pod("p", extra=request_)])
    assert binds(sim) == {}
    assert pending(sim) == {"default/p": "0/1 nodes are available: 1 NodeInsufficientDevice."}


# -- the generic resource fit ------------------------------------------------------------------


def test_gpu_resources_no_node_advertises_do_not_block_a_gpu_pod() -> None:
    # The node advertises neither nvidia.com/gpu nor nvidia.com/gpumem: HAMi keeps them all out
    # of kube-scheduler's resource fit, and so does deviceshare.
    sim = run([gpu_node("n1", card("GPU-a")), pod("p", extra=gpu(3000))])
    assert binds(sim) == {"default/p": "n1"}


GPU_ONLY_NODE = node(
    "n1", extra={"nvidia.com/gpu": "10"}, annotations={REGISTER: register(card("GPU-a"))}
)
"""A HAMi node as the API shows it: allocatable ``nvidia.com/gpu`` = count × healthy cards."""


def test_a_pod_asking_only_for_gpu_resources_is_scheduled() -> None:
    sim = run([GPU_ONLY_NODE, pod("p", cpu=None, memory=None, extra=gpu(3000))])
    assert binds(sim) == {"default/p": "n1"}
    assert allocated(sim, "default/p") == "GPU-a,NVIDIA,3000,0:;"


def test_without_proportion_a_pod_asking_only_for_gpu_resources_is_scheduled() -> None:
    text = policy_text(
        "enqueue, allocate, backfill",
        ["priority", "gang"],
        ["predicates", "nodeorder", "deviceshare"],
        arguments={"deviceshare": {"deviceshare.VGPUEnable": True}},
    )
    sim = run([GPU_ONLY_NODE, pod("p", cpu=None, memory=None, extra=gpu(3000))], policy_yaml=text)
    assert binds(sim) == {"default/p": "n1"}
    assert allocated(sim, "default/p") == "GPU-a,NVIDIA,3000,0:;"


NO_NODE_HAS_GPUMEM = "0/1 nodes are available: 1 Insufficient nvidia.com/gpumem."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            policy_text(
                "enqueue, allocate, backfill", ["priority", "gang"], ["predicates", "nodeorder"]
            ),
            NO_NODE_HAS_GPUMEM,
            id="without deviceshare: no node has the memory",
        ),
        pytest.param(
            policy_text(
                "enqueue, allocate, backfill",
                ["priority", "gang"],
                ["predicates", "nodeorder", "deviceshare"],
            ),
            NO_NODE_HAS_GPUMEM,
            id="deviceshare without VGPUEnable: no node has the memory",
        ),
        pytest.param(
            deviceshare_policy(deviceshare=False),
            NO_NODE_HAS_GPUMEM,
            id="without deviceshare, with proportion: no node has it, whatever the queue's quota",
        ),
    ],
)
def test_without_vgpu_sharing_the_gpu_memory_is_an_ordinary_resource(
    text: str, message: str
) -> None:
    sim = run([GPU_ONLY_NODE, pod("p", extra=gpu(3000))], policy_yaml=text)
    assert binds(sim) == {}
    assert pending(sim) == {"default/p": message}


# -- usage rebuilt from the pods on the nodes --------------------------------------------------


@pytest.mark.parametrize(
    ("pod_on_node", "fits"),
    [
        pytest.param(holder("h", "n1", "GPU-a,NVIDIA,14000,0:;"), False, id="a running holder"),
        pytest.param(
            holder("h", "n1", "GPU-a,NVIDIA,14000,0:;", phase="Succeeded"),
            True,
            id="a Succeeded holder does not count",
        ),
        pytest.param(
            holder("h", "n1", "GPU-a,NVIDIA,14000,0:;", phase="Failed"),
            True,
            id="a Failed holder does not count",
        ),
        pytest.param(
            holder("h", "n1", "GPU-zzz,NVIDIA,14000,0:;"),
            True,
            id="a card the node does not register is ignored",
        ),
        pytest.param(
            holder("h", "n1", "GPU-a,NVIDIA,14000,0:;", assigned=False),
            True,
            id="a pod without hami.io/vgpu-node holds nothing",
        ),
        pytest.param(
            holder("h", "n1", "GPU-a,NVIDIA,lots,0:;"),
            True,
            id="an allocation that cannot be read is not counted",
        ),
        pytest.param(
            holder("h", "n1", "garbage"), True, id="an allocation that names no card at all"
        ),
    ],
)
def test_usage_is_rebuilt_from_the_allocations_of_pods_on_the_node(
    pod_on_node: Pod, fits: bool
) -> None:
    sim = run([gpu_node("n1", card("GPU-a")), pod_on_node, pod("p", extra=gpu(3000))])
    if fits:
        assert binds(sim) == {"default/p": "n1"}
    else:
        assert binds(sim) == {}
        assert pending(sim) == {"default/p": "0/1 nodes are available: 1 CardInsufficientMemory."}


def terminating(p: Pod) -> Pod:
    meta = p.metadata.model_copy(update={"deletion_timestamp": 1_600_000_000.0})
    return p.model_copy(update={"metadata": meta})


@pytest.mark.parametrize(
    "pod_on_node",
    [
        pytest.param(
            pod(
                "h",
                node_name="n1",
                scheduler="default-scheduler",
                cpu=None,
                memory=None,
                annotations={ALLOCATED: "GPU-a,NVIDIA,14000,0:;", NODE_ANN: "n1"},
            ),
            id="a pod of another scheduler",
        ),
        pytest.param(
            terminating(holder("h", "n1", "GPU-a,NVIDIA,14000,0:;")), id="a terminating pod"
        ),
        pytest.param(
            holder("h", "n1", "GPU-a,NVIDIA,14000,0:;", phase="Pending"),
            id="a pod assigned but not yet started",
        ),
    ],
)
def test_every_pod_holding_cards_on_the_node_counts(pod_on_node: Pod) -> None:
    sim = run([gpu_node("n1", card("GPU-a")), pod_on_node, pod("p", extra=gpu(3000))])
    assert binds(sim) == {}
    assert pending(sim) == {"default/p": "0/1 nodes are available: 1 CardInsufficientMemory."}


def test_a_holder_on_one_card_sends_the_new_pod_to_the_other() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            holder("h", "n1", "GPU-b,NVIDIA,2000,10:;"),
            pod("p", extra=gpu(3000)),
        ]
    )
    assert allocated(sim, "default/p") == "GPU-a,NVIDIA,3000,0:;"


def test_an_assigned_pod_counts_its_init_containers_at_their_peak() -> None:
    # Init 12000 then app 2000 on the same card: 12000 held (not 14000); 4000 left.
    init = [{"name": "init", "image": "busybox"}]
    h = holder(
        "h",
        "n1",
        "GPU-a,NVIDIA,12000,0:;GPU-a,NVIDIA,2000,0:;",
        phase="Pending",
        init_containers=init,
    )
    sim = run(
        [
            gpu_node("n1", card("GPU-a")),
            h,
            pod("fits", extra=gpu(4000)),
            pod("too-big", extra=gpu(1000)),
        ]
    )
    assert binds(sim) == {"default/fits": "n1"}
    assert pending(sim) == {"default/too-big": "0/1 nodes are available: 1 CardInsufficientMemory."}


def test_a_pod_bound_in_one_cycle_holds_its_card_in_the_next() -> None:
    sim = run(
        [gpu_node("n1", card("GPU-a")), pod("p1", extra=gpu(10000)), pod("p2", extra=gpu(10000))],
        cycles=2,
    )
    assert binds(sim) == {"default/p1": "n1"}
    message = "0/1 nodes are available: 1 CardInsufficientMemory."
    assert pending(sim, 0) == {"default/p2": message}
    assert pending(sim, 1) == {"default/p2": message}


def test_many_nodes_each_fill_up_as_pods_of_one_shape_are_placed() -> None:
    # 16 one-card nodes and 20 pods of 10000 MiB: one pod per card, the last four fit nowhere.
    nodes = [gpu_node(f"n{i:02}", card(f"GPU-{i:02}")) for i in range(16)]
    pods = [pod(f"p{i:02}", extra=gpu(10000)) for i in range(20)]
    sim = run([*nodes, *pods])
    placed = binds(sim)
    assert len(placed) == 16
    assert sorted(placed.values()) == [f"n{i:02}" for i in range(16)]
    stuck = pending(sim)
    assert len(stuck) == 4
    assert set(stuck.values()) == {"0/16 nodes are available: 16 CardInsufficientMemory."}


# -- gangs -------------------------------------------------------------------------------------


def test_a_gang_that_cannot_start_gives_its_cards_back_to_the_next_pod() -> None:
    # Three 10000 MiB tasks on two 16000 cards: two are placed, the third fits nowhere, the gang
    # is discarded. The later pod needs both cards whole, so it binds only if the two tasks'
    # reservations were given back.
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            podgroup("gang", min_member=3),
            *(pod(f"g{i}", group="gang", extra=gpu(10000)) for i in range(3)),
            pod("whole", extra=gpu(16000, n=2)),
        ],
        cycles=2,
    )
    assert binds(sim) == {"default/whole": "n1"}
    assert allocated(sim, "default/whole") == "GPU-b,NVIDIA,16000,0:GPU-a,NVIDIA,16000,0:;"
    first = {f"{c.namespace}/{c.name}": c.reason for c in sim.cycles[0].result.pod_conditions}
    # the gang was tried first: two tasks were placed before it was given up
    assert first == {
        "default/g0": "Schedulable",
        "default/g1": "Schedulable",
        "default/g2": "Unschedulable",
    }
    assert pending(sim, 0) == {"default/g2": "0/1 nodes are available: 1 CardInsufficientMemory."}
    # the next cycle rebuilds "whole"'s usage from its annotations: no card has 10000 MiB left
    gang = (
        "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
        "Pending: 3 Unschedulable. "
        "Origin reason is g0: 0/1 nodes are available: 1 CardInsufficientMemory."
    )
    assert pending(sim, 1) == {
        "default/g0": "0/1 nodes are available: 1 CardInsufficientMemory.",
        "default/g1": gang,
        "default/g2": gang,
    }


def test_in_a_large_cluster_a_discarded_gangs_cards_are_free_again() -> None:
    # 16 one-card nodes; the gang's first task takes a card, its second fits no node (cpu), the
    # gang is discarded; then 16 pods of the first task's shape need all 16 cards.
    nodes = [gpu_node(f"n{i:02}", card(f"GPU-{i:02}")) for i in range(16)]
    sim = run(
        [
            *nodes,
            podgroup("gang", min_member=2),
            pod("g0", group="gang", extra=gpu(10000)),
            pod("g1", group="gang", cpu="5", extra=gpu(10000)),
            *(pod(f"s{i:02}", extra=gpu(10000)) for i in range(16)),
        ]
    )
    placed = binds(sim)
    assert set(placed) == {f"default/s{i:02}" for i in range(16)}
    assert sorted(placed.values()) == [f"n{i:02}" for i in range(16)]


# -- namespace quota ---------------------------------------------------------------------------


def test_a_pod_that_would_pass_its_namespaces_gpu_memory_quota_is_pending() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            pod("t1", namespace="team", extra=gpu(3000)),
            pod("t2", namespace="team", extra=gpu(3000)),
            pod("other", namespace="default", extra=gpu(3000)),
        ],
        quotas=[quota("team", {"limits.nvidia.com/gpumem": "5000"})],
    )
    assert binds(sim) == {"team/t1": "n1", "default/other": "n1"}
    assert pending(sim) == {"team/t2": "0/1 nodes are available: 1 ResourceQuotaNotFit."}


def test_the_gpu_memory_quota_counts_every_card_of_the_pod() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            pod("t", namespace="team", extra=gpu(3000, n=2)),
        ],
        quotas=[quota("team", {"limits.nvidia.com/gpumem": "5000"})],
    )
    assert binds(sim) == {}
    assert pending(sim) == {
        "team/t": "0/1 nodes are available: 1 AllocatedCardsInsufficientRequest, "
        "1 ResourceQuotaNotFit."
    }


def test_the_quota_held_by_a_discarded_gang_is_given_back() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            podgroup("gang", namespace="team", min_member=3),
            *(pod(f"g{i}", namespace="team", group="gang", extra=gpu(10000)) for i in range(3)),
            pod("late", namespace="team", extra=gpu(16000)),
        ],
        quotas=[quota("team", {"limits.nvidia.com/gpumem": "20000"})],
    )
    assert binds(sim) == {"team/late": "n1"}


def test_the_memory_factor_multiplies_both_the_request_and_the_quota() -> None:
    # 2000 MiB asked × 2 = 4000 per pod; the limit 5000 × 2 = 10000 holds two of them.
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            *(pod(f"t{i}", namespace="team", extra=gpu(2000)) for i in range(3)),
        ],
        quotas=[quota("team", {"limits.nvidia.com/gpumem": "5000"})],
        MemoryFactor=2,
    )
    assert binds(sim) == {"team/t0": "n1", "team/t1": "n1"}
    assert allocated(sim, "team/t0") == "GPU-b,NVIDIA,4000,0:;"
    assert pending(sim) == {"team/t2": "0/1 nodes are available: 1 ResourceQuotaNotFit."}


@pytest.mark.parametrize(
    ("hard", "bound"),
    [
        pytest.param({"limits.nvidia.com/gpucores": "50"}, {"team/t0": "n1"}, id="a cores limit"),
        pytest.param({"limits.nvidia.com/gpumem": "0"}, {}, id="an explicit 0 blocks"),
        pytest.param(
            {"requests.nvidia.com/gpumem": "0", "limits.cpu": "100"},
            {"team/t0": "n1", "team/t1": "n1"},
            id="requests. keys and other resources are not device quota",
        ),
    ],
)
def test_which_quota_keys_limit_gpu_pods(hard: dict[str, str], bound: dict[str, str]) -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            *(pod(f"t{i}", namespace="team", extra=gpu(1000, cores=30)) for i in range(2)),
        ],
        quotas=[quota("team", hard)],
    )
    assert binds(sim) == bound
    assert pending(sim) == {
        f"team/t{i}": "0/1 nodes are available: 1 ResourceQuotaNotFit."
        for i in range(2)
        if f"team/t{i}" not in bound
    }


def test_running_pods_use_up_the_quota() -> None:
    sim = run(
        [
            gpu_node("n1", card("GPU-a"), card("GPU-b")),
            holder("h", "n1", "GPU-a,NVIDIA,4000,0:;", namespace="team"),
            pod("t", namespace="team", extra=gpu(2000)),
        ],
        quotas=[quota("team", {"limits.nvidia.com/gpumem": "5000"})],
    )
    assert binds(sim) == {}
    assert pending(sim) == {"team/t": "0/1 nodes are available: 1 ResourceQuotaNotFit."}


# -- node score --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "annotations", "expected"),
    [
        pytest.param({}, {}, "idle", id="weight 0 leaves the choice to nodeorder"),
        pytest.param(
            {"ScheduleWeight": 10, "SchedulePolicy": "binpack"},
            {},
            "busy",
            id="binpack prefers the fuller node",
        ),
        pytest.param(
            {"ScheduleWeight": 10}, {}, "busy", id="HAMi's default node policy is binpack"
        ),
        pytest.param(
            {"ScheduleWeight": 10, "SchedulePolicy": "spread"},
            {},
            "idle",
            id="spread prefers the emptier node",
        ),
        pytest.param(
            {"ScheduleWeight": 10, "SchedulePolicy": "spread"},
            {"hami.io/node-scheduler-policy": "binpack"},
            "busy",
            id="the pod's node policy overrides the scheduler's",
        ),
    ],
)
def test_the_device_score_orders_nodes(
    arguments: dict[str, Any], annotations: dict[str, str], expected: str
) -> None:
    # "busy" also holds a CPU-heavy pod, so nodeorder alone prefers "idle".
    sim = run(
        [
            gpu_node("busy", card("GPU-busy")),
            gpu_node("idle", card("GPU-idle")),
            holder("h", "busy", "GPU-busy,NVIDIA,8000,50:;"),
            pod("cpu-hog", node_name="busy", cpu="3", memory="6Gi"),
            pod("p", cpu="100m", memory="100Mi", extra=gpu(1000), annotations=annotations),
        ],
        **arguments,
    )
    assert binds(sim) == {"default/p": expected}


# -- robustness --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "registration",
    [
        pytest.param("{not json", id="not JSON"),
        pytest.param('[{"id": "GPU-x", "count": "ten"}]', id="a count that is a string"),
        pytest.param("GPU-x,10,oops:", id="a colon form with too few fields"),
        pytest.param('{"id": "GPU-x"}', id="an object, not a list"),
    ],
)
def test_a_registration_that_cannot_be_read_leaves_its_node_without_cards(
    registration: str,
) -> None:
    sim = run(
        [
            node("broken", annotations={REGISTER: registration}, labels={"host": "broken"}),
            gpu_node("n1", card("GPU-a")),
            pod("p", extra=gpu(1000)),
            pod("q", extra=gpu(1000), node_selector={"host": "broken"}),
        ]
    )
    assert binds(sim) == {"default/p": "n1"}
    assert pending(sim) == {
        "default/q": "0/2 nodes are available: 1 NodeInsufficientDevice, "
        "1 node(s) didn't match Pod's node affinity/selector."
    }
    (problem,) = sim.cycles[0].problems
    assert (problem.kind, problem.name) == ("Node", "broken")
    assert problem.message.startswith(f"metadata.annotations[{REGISTER}]: ")
    assert problem.message.endswith("; the node has no shareable NVIDIA devices")


def test_registration_keys_are_matched_case_insensitively() -> None:
    registration = (
        '[{"ID":"GPU-x","Count":10,"DevMem":8000,"DevCore":100,'
        '"Type":"NVIDIA-Tesla T4","Health":true,"Extra":1}]'
    )
    sim = run([node("n1", annotations={REGISTER: registration}), pod("p", extra=gpu(8000))])
    assert allocated(sim, "default/p") == "GPU-x,NVIDIA,8000,0:;"


def test_the_legacy_colon_registration_is_read() -> None:
    legacy = (
        "GPU-aaa,10,15360,100,NVIDIA-Tesla T4,0,true,0,hami-core:"
        "GPU-bbb,10,15360,100,NVIDIA-Tesla T4,1,true,1,hami-core:"
    )
    sim = run([node("n1", annotations={REGISTER: legacy}), pod("p", extra=gpu(3000))])
    assert allocated(sim, "default/p") == "GPU-bbb,NVIDIA,3000,0:;"


# -- plugin arguments --------------------------------------------------------------------------


def test_a_chain_of_gpu_policies_is_accepted() -> None:
    loaded = policy(deviceshare_policy(GPUSchedulerPolicy="binpack,numa"), REGISTRY)
    option = loaded.option("deviceshare")
    assert option is not None
    assert isinstance(option.args, DeviceShareArgs)
    assert option.args.gpu_policy == "binpack,numa"
    assert "nvidia.com/gpumem" in loaded.managed_resources


@pytest.mark.parametrize(
    ("argument", "value", "says"),
    [
        pytest.param("GPUSchedulerPolicy", "foo", "unknown GPU policy 'foo'", id="policy"),
        pytest.param(
            "GPUSchedulerPolicy",
            "binpack, foo",
            "unknown GPU policy 'foo'",
            id="a policy chain with an unknown link",
        ),
        pytest.param(
            "Vendors",
            ["volcano-vnpu"],
            "is turned on by deviceshare.AscendHAMiVNPUEnable",
            id="Volcano's vNPUs named as a vendor",
        ),
        pytest.param(
            "NodeLockTimeout", "-1s", "must be a positive duration", id="negative lock timeout"
        ),
        pytest.param("NodeLockTimeout", "0s", "must be a positive duration", id="zero timeout"),
        pytest.param("NodeLockTimeout", "abc", "invalid duration 'abc'", id="not a duration"),
        pytest.param("MemoryFactor", 0, "greater than or equal to 1", id="memory factor 0"),
        pytest.param("VGPUEnabled", True, "nothing reads this key", id="a misspelt key"),
        pytest.param("SchedulePolicy", "fullest", "'binpack' or 'spread'", id="node policy"),
        pytest.param("ScheduleWeight", -1, "greater than or equal to 0", id="negative weight"),
        pytest.param(
            "DefaultCores", 101, "less than or equal to 100", id="default cores above 100"
        ),
    ],
)
def test_a_bad_deviceshare_argument_is_rejected_naming_it(
    argument: str, value: Any, says: str
) -> None:
    key = f"tiers[1].plugins[3].arguments['deviceshare.{argument}']"
    with pytest.raises(ConfigError) as caught:
        policy(deviceshare_policy(**{argument: value}), REGISTRY)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"{key}: ")
    assert says in str(caught.value)


# -- Volcano's vGPU dialect --------------------------------------------------------------------


def test_volcanos_vgpu_dialect_is_scheduled_and_written_in_its_own_keys() -> None:
    sim = run(
        [
            node("n1", annotations={VOLCANO_REGISTER: VOLCANO_CARDS}),
            pod("p", extra={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"}),
        ]
    )
    assert binds(sim) == {"default/p": "n1"}
    now = stamp(sim)
    assert sim.bind_annotations["default/p"] == {
        "volcano.sh/vgpu-node": "n1",
        "volcano.sh/vgpu-time": now,
        "volcano.sh/devices-to-allocate": "GPU-v1,NVIDIA,3000,0:;",
        "volcano.sh/vgpu-ids-new": "GPU-v1,NVIDIA,3000,0:;",
        "volcano.sh/bind-phase": "allocating",
        "volcano.sh/bind-time": now,
    }


def test_volcanos_dialect_rebuilds_usage_from_vgpu_ids_new() -> None:
    h = pod(
        "h",
        node_name="n1",
        cpu=None,
        memory=None,
        annotations={
            "volcano.sh/vgpu-ids-new": "GPU-v1,NVIDIA,15000,0:;",
            "volcano.sh/vgpu-node": "n1",
        },
    )
    sim = run(
        [
            node("n1", annotations={VOLCANO_REGISTER: VOLCANO_CARDS}),
            h,
            pod("p", extra={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"}),
        ]
    )
    assert sim.bind_annotations["default/p"]["volcano.sh/vgpu-ids-new"] == "GPU-v0,NVIDIA,3000,0:;"


def test_volcanos_uuid_selector_picks_the_named_card() -> None:
    sim = run(
        [
            node("n1", annotations={VOLCANO_REGISTER: VOLCANO_CARDS}),
            pod(
                "p",
                extra={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"},
                annotations={"volcano.sh/vgpu-use-gpuuuid": "GPU-v0"},
            ),
            pod(
                "q",
                extra={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"},
                annotations={"volcano.sh/vgpu-use-gpuuuid": "GPU-zz"},
            ),
        ]
    )
    assert binds(sim) == {"default/p": "n1"}
    assert sim.bind_annotations["default/p"]["volcano.sh/vgpu-ids-new"] == "GPU-v0,NVIDIA,3000,0:;"
    assert pending(sim) == {"default/q": "0/1 nodes are available: 1 CardUuidMismatch."}


def test_a_card_in_mig_mode_takes_no_share_and_says_so() -> None:
    mig = {**card("GPU-m"), "mode": "mig"}
    sim = run(
        [
            gpu_node("n1", mig, card("GPU-a")),
            gpu_node("n2", mig | {"id": "GPU-n"}),
            pod("p", extra=gpu(1000)),
            pod("q", extra=gpu(1000), node_selector={"host": "n2"}),
        ]
    )
    assert binds(sim) == {"default/p": "n1"}
    assert sim.bind_annotations["default/p"][ALLOCATED] == "GPU-a,NVIDIA,1000,0:;"
    assert pending(sim)["default/q"] == (
        "0/2 nodes are available: 1 CardMigTopologyInfeasible, 1 node(s) didn't match Pod's "
        "node affinity/selector."
    )


def test_enable_predicate_false_switches_the_card_filter_off_and_enable_node_order_the_score() -> (
    None
):
    objects: list[Obj] = [
        gpu_node("busy", card("GPU-busy")),
        gpu_node("idle", card("GPU-idle", 1000)),
        holder("h", "busy", "GPU-busy,NVIDIA,8000,50:;"),
        pod("cpu-hog", node_name="busy", cpu="3", memory="6Gi"),
        pod("p", extra=gpu(2000)),
    ]
    weighted = deviceshare_policy(ScheduleWeight=10)
    # on: the filter keeps p off "idle" (its card has 1000 MiB), the score sends it to "busy"
    assert binds(run(objects, policy_yaml=weighted)) == {"default/p": "busy"}
    no_filter = weighted.replace(
        "- name: deviceshare", "- name: deviceshare\n    enablePredicate: false"
    )
    no_score = weighted.replace(
        "- name: deviceshare", "- name: deviceshare\n    enableNodeOrder: false"
    )
    assert no_filter != weighted and no_score != weighted
    # without the filter the score alone still prefers "busy"; without the score nodeorder
    # prefers the emptier "idle", but the filter keeps p off it anyway
    assert binds(run(objects, policy_yaml=no_filter)) == {"default/p": "busy"}
    assert binds(run(objects, policy_yaml=no_score)) == {"default/p": "busy"}
    both_off = no_filter.replace(
        "- name: deviceshare\n    enablePredicate: false",
        "- name: deviceshare\n    enablePredicate: false\n    enableNodeOrder: false",
    )
    # with both off nothing stops p from the card that cannot hold it
    assert binds(run(objects, policy_yaml=both_off)) == {"default/p": "idle"}


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        pytest.param({"nvidia.com/gpumem": "2000"}, "nvidia.com/gpumem", id="memory, no count"),
        pytest.param(
            {"nvidia.com/gpu": "0", "nvidia.com/gpucores": "20"},
            "nvidia.com/gpu, nvidia.com/gpucores",
            id="a zero count",
        ),
    ],
)
def test_a_device_request_hami_would_drop_keeps_the_pod_waiting_and_says_why(
    limits: dict[str, str], named: str
) -> None:
    # HAMi would treat the container as asking for no card and bind the pod anywhere
    sim = run([gpu_node("n1", card("GPU-a")), node("cpu"), pod("p", extra=limits)])
    assert binds(sim) == {}
    assert pending(sim)["default/p"] == (
        f"0/2 nodes are available: container 'main': {named} is not a NVIDIA device request "
        "(nvidia.com/gpu must be a positive whole number and nvidia.com/gpumem a whole number "
        "of MiB, not negative)."
    )


def helm_preempting_policy(**arguments: Any) -> str:
    """Volcano's Helm policy with the preempt action, and deviceshare after binpack with
    ``deviceshare.VGPUEnable: true`` and ``arguments`` (written as JSON values)."""
    helm = (Path(__file__).resolve().parents[2] / "policies" / "volcano-helm.yaml").read_text()
    args = "".join(f"      deviceshare.{k}: {json.dumps(v)}\n" for k, v in arguments.items())
    text = helm.replace(
        'actions: "enqueue, allocate, backfill"', 'actions: "enqueue, allocate, preempt, backfill"'
    ).replace(
        "  - name: binpack\n",
        "  - name: binpack\n  - name: deviceshare\n"
        f"    arguments:\n      deviceshare.VGPUEnable: true\n{args}",
    )
    assert "deviceshare" in text and "preempt," in text
    return text


def tenants_and_preemptor(
    card_node: Obj, *, held: dict[str, str], tenant: dict[str, str], preemptor: dict[str, str]
) -> list[Obj]:
    """``card_node`` (named n1) with one card shared by four low-priority running tenants of
    group ``low`` (annotated ``held``, each asking ``tenant``), and the high-priority pod
    ``high-0`` of group ``high``, Inqueue, asking ``preemptor``."""
    return [
        card_node,
        priority_class("low", 10),
        priority_class("high", 1000),
        podgroup("low", min_member=1, phase="Running", priority_class="low"),
        *[
            pod(
                f"low-{i}",
                group="low",
                node_name="n1",
                priority_class="low",
                annotations=held,
                extra=tenant,
            )
            for i in range(4)
        ],
        podgroup("high", min_member=1, phase="Inqueue", priority_class="high"),
        pod("high-0", group="high", priority_class="high", extra=preemptor),
    ]


def test_a_high_priority_gpu_pod_preempts_the_low_priority_pods_holding_its_card() -> None:
    # one 16000 MiB card held by four low-priority 4000 MiB pods; the preemptor needs 10000
    objs = tenants_and_preemptor(
        gpu_node("n1", card("GPU-a")),
        held={NODE_ANN: "n1", ALLOCATED: "GPU-a,NVIDIA,4000,0:;"},
        tenant=gpu(4000),
        preemptor=gpu(10000),
    )
    text = helm_preempting_policy()
    sim = run(objs, policy_yaml=text, cycles=2)
    evicted = [e.name for e in sim.cycles[0].result.evictions]
    assert len(evicted) == 3  # the fewest that free 10000 MiB of the card
    assert not sim.cycles[1].result.evictions
    assert binds(sim) == {"default/high-0": "n1"}
    assert sim.bind_annotations["default/high-0"][ALLOCATED] == "GPU-a,NVIDIA,10000,0:;"
