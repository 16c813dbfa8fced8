"""Ascend NPUs the Volcano way: the rules of Volcano's ``ascend/hami/device_info.go`` (ed72c7c8)
that ``device_info_test.go`` does not test, each row named after the Go function it follows
(``ExtractResourceRequest``, ``ResourceReqs`` and ``selectDevices``, ``CreateAnnotations``,
``ScoreNode``); the deviceshare arguments as Volcano's ``enablePredicate`` takes them, with
real config 042; and sessions end to end. (The Go tests' own tables:
``test_volcano_vnpu_device.py``.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import REGISTRY, Obj, node, pod, policy, state_of
from caldera.api.task import NodeLock
from caldera.devices.fit import CardUse, FitOptions, fit_node
from caldera.devices.model import UNSET_PERCENTAGE, Card, CardRequest, DeviceDefaults, Grant
from caldera.devices.vendor import ScoreInput, Vendor
from caldera.devices.volcano_vnpu import HELD_BY_POD, IGNORED_RESOURCES, node_score, vnpu_vendor
from caldera.devices.volcano_vnpu_config import CHART_TYPES, CONFIG_KEY, DEFAULT_CONFIG
from caldera.errors import ConfigError
from caldera.models.core import ConfigMap
from caldera.simulate.runner import Simulation, simulate

CONFIG_042 = (
    Path(__file__).resolve().parents[2] / "examples/devices/volcano-vnpu/volcano-scheduler.conf"
).read_text()
TYPES = {t.common_word: t for t in CHART_TYPES}
(A310P,) = DEFAULT_CONFIG.types
COUNT, MEMORY, CORE = (
    "huawei.com/Ascend310P",
    "huawei.com/Ascend310P-memory",
    "huawei.com/Ascend310P-core",
)
SOFT = {"huawei.com/vnpu-mode": "hami-core"}


def npu(vendor: Vendor, uuid: str, used: tuple[int, int, int] = (0, 0, 0),
        network: int | None = None, health: bool = True) -> tuple[Card, CardUse]:  # fmt: skip
    """A 310P (or 910B3) NPU as HAMi's device plugin registers it, four slots, and its usage."""
    devmem, devcore = (21527, 8) if "310P" in vendor.name else (65536, 20)
    return Card(uuid, 4, devmem, devcore, vendor.name, health, network=network), CardUse(*used)


# -- ExtractResourceRequest ----------------------------------------------------------------------

P310 = vnpu_vendor(A310P)
REQUESTS = {
    "count and memory": ({COUNT: 1, MEMORY: 1024}, {}, (1, 1024, UNSET_PERCENTAGE, 0)),
    "memory alone asks one NPU": ({MEMORY: 4096}, {}, (1, 4096, UNSET_PERCENTAGE, 0)),
    "no memory: the whole NPU": ({COUNT: 2}, {}, (2, 0, 100, 0)),
    "memory and cores from the requests": ({COUNT: 1}, {MEMORY: 2048, CORE: 4},
                                            (1, 2048, UNSET_PERCENTAGE, 4)),
    "a byte quantity: Go's int32 of it (16Gi is 0, the whole NPU)": (
        {COUNT: 1, MEMORY: 16 * 2**30}, {}, (1, 0, 100, 0)),
    "3Gi in bytes: int32 wraps it below 0": ({COUNT: 1, MEMORY: 3 * 2**30}, {},
                                             (1, -(2**30), UNSET_PERCENTAGE, 0)),
    "a fractional count: AsInt64 fails, 0 NPUs": ({COUNT: 0.5}, {}, (0, 0, 100, 0)),
}  # fmt: skip


@pytest.mark.parametrize(("limits", "requests", "want"), REQUESTS.values(), ids=REQUESTS.keys())
def test_extract_resource_request(
    limits: dict[str, float], requests: dict[str, float], want: tuple[int, int, int, int]
) -> None:
    """``ExtractResourceRequest``: HAMi's configured defaults and memory factor do not apply."""
    got = P310.read_request(limits, requests, DeviceDefaults(1000, 20, 4))
    assert got == CardRequest("Ascend310P", *want)


@pytest.mark.parametrize(
    ("limits", "requests"),
    [
        pytest.param({}, {COUNT: 1.0}, id="the count in the requests alone"),
        pytest.param({CORE: 4.0}, {}, id="cores alone"),
    ],
)
def test_a_container_without_the_count_or_memory_in_its_limits_asks_nothing(
    limits: dict[str, float], requests: dict[str, float]
) -> None:
    """``HasDeviceRequest`` and ``ExtractResourceRequest`` read the limits alone."""
    assert P310.read_request(limits, requests, DeviceDefaults()) is None


# -- ResourceReqs, selectDevices -----------------------------------------------------------------


def walk(
    vendor: Vendor,
    npus: list[tuple[Card, CardUse]],
    request: CardRequest,
    pod_notes: dict[str, str] | None = None,
    node_notes: dict[str, str] | None = None,
    containers: int = 1,
) -> tuple[list[list[tuple[str, int, int]]] | None, str]:
    """``selectDevices`` through ``fit_node``: per container the (NPU, memory, cores) given, or
    None and the reason."""
    opts = vendor.read_options(pod_notes or {}, "spread", frozenset())
    assert vendor.read_node is not None
    opts = vendor.read_node(node_notes or {}, opts)
    cards, uses = [c for c, _ in npus], [u for _, u in npus]
    fit = fit_node(cards, uses, [(False, request)] * containers, opts, vendor.name, vendor.walk)
    if fit.grants is None:
        return None, fit.reason
    return [[(g.uuid, g.memory, g.cores) for g in c] for c in fit.grants], ""


BINPACK, SPREAD = vnpu_vendor(A310P, policy="binpack"), vnpu_vendor(A310P, policy="spread")
B3 = vnpu_vendor(TYPES["Ascend910B3"])


def one(nums: int, memory: int, cores: int = 0, word: str = "Ascend310P") -> CardRequest:
    return CardRequest(word, nums, memory, UNSET_PERCENTAGE if memory else 100, cores)


SELECT = {
    "binpack: the NPU with most memory in use first, memory rounded up to vir01": (
        BINPACK, [("a", (0, 0, 0)), ("b", (1, 3072, 0))], one(1, 1024), [[("b", 3072, 0)]], ""),
    "spread: an unused NPU first": (
        SPREAD, [("a", (1, 3072, 0)), ("b", (0, 0, 0))], one(1, 1024), [[("b", 3072, 0)]], ""),
    "no policy: registration order": (
        P310, [("a", (1, 3072, 0)), ("b", (0, 0, 0))], one(1, 1024), [[("a", 3072, 0)]], ""),
    "no memory: the whole of the first NPU in order (memoryAllocatable)": (
        SPREAD, [("a", (1, 3072, 0)), ("b", (0, 0, 0))], one(1, 0), [[("b", 21527, 0)]], ""),
    "past the capacity the memory trims to 0, and even a full NPU takes it": (
        P310, [("a", (1, 21527, 0))], one(1, 24577), [[("a", 0, 0)]], ""),
    "a card's health is not read": (
        P310, [("a", (0, 0, 0), None, False)], one(1, 1024), [[("a", 3072, 0)]], ""),
    "the AI cores are the card's, not capped at 100": (
        P310, [("a", (0, 0, 0))], one(1, 1024, 9), None, "1/1 CardInsufficientCore"),
    "too little memory left on every NPU": (
        P310, [("a", (1, 20000, 0)), ("b", (1, 20000, 0))], one(1, 4096), None,
        "2/2 CardInsufficientMemory"),
    "one NPU of two fits": (
        P310, [("a", (1, 20000, 0)), ("b", (0, 0, 0))], one(2, 21527), None,
        "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory"),
    "verifyReq: partial memory on two NPUs": (
        P310, [("a", (0, 0, 0)), ("b", (0, 0, 0))], one(2, 4096), None,
        "2/2 PartialMemoryOnSeveralCards"),
    "910 NetworkIDs: one NPU from the network with the most fitting NPUs": (
        B3, [("n0", (0, 0, 0), 0), ("n1", (0, 0, 0), 1), ("n2", (0, 0, 0), 1)],
        one(1, 16384, word="Ascend910B3"), [[("n1", 16384, 0)]], ""),
    "910 NetworkIDs: two NPUs from one network": (
        B3, [("n0", (0, 0, 0), 0), ("n1", (0, 0, 0), 1), ("n2", (0, 0, 0), 0)],
        one(2, 0, word="Ascend910B3"), [[("n0", 65536, 0), ("n2", 65536, 0)]], ""),
    "310P: NetworkIDs are not read": (
        P310, [("n0", (0, 0, 0), 0), ("n1", (0, 0, 0), 1), ("n2", (0, 0, 0), 1)],
        one(1, 1024), [[("n0", 3072, 0)]], ""),
}  # fmt: skip


@pytest.mark.parametrize(
    ("vendor", "npus", "request_", "grants", "reason"), SELECT.values(), ids=SELECT.keys()
)
def test_select_devices(
    vendor: Vendor,
    npus: list[tuple[object, ...]],
    request_: CardRequest,
    grants: list[list[tuple[str, int, int]]] | None,
    reason: str,
) -> None:
    """``ResourceReqs`` (memory rounded by the scheduler) and ``selectDevices`` with ``fit``:
    the cards in ``CalScore``'s order, walked from the first."""
    cards = [npu(vendor, *n) for n in npus]  # type: ignore[arg-type]
    assert walk(vendor, cards, request_) == (grants, reason)


def test_a_soft_split_keeps_its_memory_and_counts_cores_in_percent() -> None:
    """``ResourceReqs`` skips ``trimMemory`` in hami-core mode; ``fit`` counts 100 cores."""
    cards, node_notes = [npu(P310, "a")], {"hami-vnpu-core": "true"}
    assert walk(P310, cards, one(1, 1000, 60), SOFT, node_notes) == ([[("a", 1000, 60)]], "")
    assert walk(P310, cards, one(1, 1000, 120), SOFT, node_notes) == (
        None,
        "1/1 CardInsufficientCore",
    )
    assert walk(P310, cards, one(1, 1000, 60), SOFT) == (None, "1/1 ModeNotFit")


def test_a_pods_containers_never_share_an_npu() -> None:
    """``selectDevices``: the NPUs an earlier container took are not offered to the next
    (``usedDevs``), however much room is left on them."""
    two = [npu(P310, "a"), npu(P310, "b")]
    assert walk(P310, two, one(1, 1024), containers=2) == (
        [[("a", 3072, 0)], [("b", 3072, 0)]],
        "",
    )
    assert walk(P310, two[:1], one(1, 1024), containers=2) == (None, f"1/1 {HELD_BY_POD}")


# -- CreateAnnotations ---------------------------------------------------------------------------

ANNOTATIONS = {
    "a hard split: the template": ({}, 3072, 0, '[{"UUID":"NPU-0","temp":"vir01"}]'),
    "the whole NPU: no template": ({}, 21527, 0, '[{"UUID":"NPU-0"}]'),
    "memory trimmed to 0: the smallest template": ({}, 0, 0, '[{"UUID":"NPU-0","temp":"vir01"}]'),
    "a soft split: memory and cores": (
        SOFT, 4096, 50, '[{"UUID":"NPU-0","memory":4096,"core":50}]'),
    "a soft split without cores: no core field": (
        SOFT, 4096, 0, '[{"UUID":"NPU-0","memory":4096}]'),
}  # fmt: skip


@pytest.mark.parametrize(
    ("notes", "memory", "cores", "runtime"), ANNOTATIONS.values(), ids=ANNOTATIONS.keys()
)
def test_create_annotations(notes: dict[str, str], memory: int, cores: int, runtime: str) -> None:
    """``CreateAnnotations`` and ``Allocate``: the allocation of the containers that asked
    (a sidecar first, which asked nothing, has no entry), and the ``RuntimeInfo`` JSON."""
    grant = Grant("NPU-0", "Ascend310P", memory, cores)
    got = P310.bind_annotations("n1", [[], [grant]], 1700000000.5, notes, ["sidecar", "main"])
    allocation = f"NPU-0,Ascend310P,{memory},{cores}:;"
    assert got == {
        "hami.io/vgpu-node": "n1",
        "hami.io/vgpu-time": "1700000000",
        "hami.io/Ascend310P-devices-to-allocate": allocation,
        "hami.io/Ascend310P-devices-allocated": allocation,
        "hami.io/bind-phase": "allocating",
        "hami.io/bind-time": "1700000000",
        "predicate-time": "1700000000",
        "huawei.com/Ascend310P": runtime,
    }


def test_no_npu_at_all_is_gos_null() -> None:
    """``json.Marshal`` of a nil ``[]RuntimeInfo``."""
    got = P310.bind_annotations("n1", [[]], 0.0)
    assert (got["huawei.com/Ascend310P"], got["hami.io/Ascend310P-devices-allocated"]) == (
        "null",
        "",
    )


# -- ScoreNode -----------------------------------------------------------------------------------


def scored(vendor_type: str, policy_: str, npus: list[tuple[Card, CardUse]],
           grants: list[list[str]]) -> float:  # fmt: skip
    cards, before = [c for c, _ in npus], [u for _, u in npus]
    given = [[Grant(u, "", 0, 0) for u in g] for g in grants]
    seen = ScoreInput({}, cards, before, given, FitOptions(), "binpack")
    return node_score(TYPES[vendor_type], policy_)(seen)


def test_score_node_sums_the_first_npu_of_each_container() -> None:
    """``ScoreNode``: ``CalScore`` of each container's first NPU, as used before the pod."""
    npus = [npu(P310, "a", (1, 10763, 0)), npu(P310, "b"), npu(P310, "c", (1, 21527, 0))]
    assert scored("Ascend310P", "binpack", npus, [["a"], ["b"]]) == pytest.approx(49.99, 0.01)
    assert scored("Ascend310P", "binpack", npus, [["b", "c"]]) == 0.0
    assert scored("Ascend310P", "spread", npus, [["b"], ["a"]]) == 100.0
    assert scored("Ascend310P", "", npus, [["c"]]) == 0.0


def test_score_node_adds_the_share_on_one_network_on_910() -> None:
    """``ScoreNode``: 10 times the largest share of the first NPUs on one network."""
    npus = [npu(B3, "n0", network=0), npu(B3, "n1", network=1), npu(B3, "n2", network=0)]
    assert scored("Ascend910B3", "", npus, [["n0"], ["n1"]]) == 5.0
    assert scored("Ascend910B3", "", npus, [["n0"], ["n2"]]) == 10.0
    plain = [npu(B3, "x"), npu(B3, "y", network=1)]
    assert scored("Ascend910B3", "", plain, [["x"], ["y"]]) == 0.0


# -- enablePredicate: the arguments --------------------------------------------------------------


def test_real_config_042_loads_and_leaves_the_count_in_the_resource_fit() -> None:
    """``enablePredicate`` with ``GetIgnoredDevices``: memory and cores are deviceshare's, the
    count stays an ordinary resource checked against the node."""
    managed = policy(CONFIG_042, REGISTRY).managed_resources
    assert managed == IGNORED_RESOURCES
    assert {MEMORY, CORE} <= managed and COUNT not in managed


def deviceshare(**arguments: object) -> str:
    args = "".join(f"      deviceshare.{k}: {json.dumps(v)}\n" for k, v in arguments.items())
    return f'actions: "allocate"\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments:\n{args}'


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"VGPUEnable": True}, id="with VGPUEnable"),
        pytest.param({"AscendMindClusterVNPUEnable": True}, id="with the MindCluster vNPUs"),
        pytest.param({"GPUSharingEnable": True}, id="with GPUSharingEnable"),
    ],
)
def test_volcano_lets_the_hami_vnpus_go_with_every_other_mode(arguments: dict[str, bool]) -> None:
    """``enablePredicate`` refuses only GPU sharing with GPU number, and either with vGPU."""
    assert policy(deviceshare(AscendHAMiVNPUEnable=True, **arguments), REGISTRY)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        pytest.param(
            {"VGPUEnable": True, "AscendEnable": True},
            "cannot be used with HAMi's Ascend dialect",
            id="HAMi's Ascend dialect (Caldera's own: the same registrations)",
        ),
        pytest.param(
            {"VGPUEnable": True, "Vendors": ["ascend"]},
            "cannot be used with HAMi's Ascend dialect",
            id="ascend named in Vendors",
        ),
        pytest.param(
            {"VGPUEnable": True, "Vendors": ["volcano-vnpu"]},
            "turned on by deviceshare.AscendHAMiVNPUEnable",
            id="its family named in Vendors",
        ),
        pytest.param(
            {"GPUSharingEnable": True, "GPUNumberEnable": True},
            "cannot both be true",
            id="GPU sharing with GPU number (klog.Fatal)",
        ),
    ],
)
def test_what_cannot_go_with_the_hami_vnpus_is_refused(
    arguments: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        policy(deviceshare(AscendHAMiVNPUEnable=True, **arguments), REGISTRY)


# -- sessions ------------------------------------------------------------------------------------

REGISTER = "hami.io/node-register-{}"
B3_CONFIG = """vnpus:
  hamiVnpuCore: true
  configs:
  - {chipName: 910B3, commonWord: Ascend910B3, resourceName: huawei.com/Ascend910B3,
     resourceMemoryName: huawei.com/Ascend910B3-memory, memoryAllocatable: 65536,
     memoryCapacity: 65536, aiCore: 20, templates: [{name: vir10_3c_32g, memory: 32768}]}
"""


def npu_node(name: str, word: str = "Ascend310P", slots: int = 8, devmem: int = 21527) -> Obj:
    registration = json.dumps([{"id": f"{name}-0", "count": 4, "devmem": devmem, "devcore": 8}])
    return node(
        name,
        cpu="32",
        memory="64Gi",
        extra={f"huawei.com/{word}": str(slots)},
        annotations={REGISTER.format(word): registration},
    )


def run(*objects: Obj, config: str = CONFIG_042, device_config: str | None = None) -> Simulation:
    state = state_of(objects)
    if device_config is not None:
        meta = {"name": "hami-scheduler-device", "namespace": "kube-system"}
        state.add(ConfigMap.model_validate({"metadata": meta, "data": {CONFIG_KEY: device_config}}))
    return simulate(state, policy(config, REGISTRY), REGISTRY, scheduler_names=["volcano"])


def test_the_device_configmap_named_by_the_policy_gives_the_card_types() -> None:
    """``InitDevicesConfig`` and ``registerDevices``: the ConfigMap's 910B3 (one template,
    ``hamiVnpuCore`` on) replaces the default 310P."""
    b3 = {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "20000"}
    sim = run(
        npu_node("n1", "Ascend910B3", devmem=65536),
        pod("hard", cpu=None, memory=None, limits=b3),
        pod("soft", cpu=None, memory=None, limits=b3, annotations=SOFT, created=1.8e9),
        device_config=B3_CONFIG,
    )
    binds = {b.name: b for r in sim.cycles for b in r.result.binds}
    assert binds["hard"].annotations["huawei.com/Ascend910B3"] == (
        '[{"UUID":"n1-0","temp":"vir10_3c_32g"}]'
    )
    assert binds["soft"].annotations["hami.io/Ascend910B3-devices-allocated"] == (
        "n1-0,Ascend910B3,20000,0:;"
    )


def test_node_lock_enable_takes_the_bare_lock() -> None:
    """``Allocate`` with ``NodeLockEnable``: ``nodelock.LockNode(node, "hami.io/mutex.lock")``."""
    config = CONFIG_042 + "      deviceshare.NodeLockEnable: true\n"
    sim = run(npu_node("n1"), pod("p", cpu=None, memory=None, limits={COUNT: "1"}), config=config)
    ((bind,),) = [r.result.binds for r in sim.cycles]
    assert bind.node_lock == NodeLock(300.0, "hami.io/mutex.lock", True)


def test_the_count_is_checked_against_the_nodes_allocatable() -> None:
    """The count is not among ``GetIgnoredDevices``: the node's one slot, held by a running pod
    without cards, leaves none for the next."""
    held = pod("held", cpu=None, memory=None, limits={COUNT: "1"}, node_name="n1")
    sim = run(npu_node("n1", slots=1), held, pod("p", cpu=None, memory=None, limits={COUNT: "1"}))
    (waiting,) = sim.cycles[-1].result.pod_conditions
    assert f"Insufficient {COUNT}" in waiting.message


@pytest.mark.parametrize(
    ("schedule_policy", "together"),
    [
        pytest.param("binpack", True, id="binpack: the node whose NPU is in use"),
        pytest.param("spread", False, id="spread: the node whose NPU is unused"),
    ],
)
def test_the_node_score_is_volcanos_device_score(schedule_policy: str, together: bool) -> None:
    """``getDeviceScore``: ``floor(ScoreNode + 0.5)`` times ``deviceshare.ScheduleWeight``,
    ``ScoreNode`` being ``CalScore`` of the NPU the pod would get (binpack: its share in use,
    spread: 100 when unused). The second pod follows the first or avoids it."""
    config = CONFIG_042.replace("binpack", schedule_policy) + (
        "      deviceshare.ScheduleWeight: 10\n"
    )
    limits = {COUNT: "1", MEMORY: "1024"}
    sim = run(
        npu_node("n1"),
        npu_node("n2"),
        pod("first", cpu=None, memory=None, limits=limits),
        pod("second", cpu=None, memory=None, limits=limits, created=1.8e9),
        config=config,
    )
    nodes = {b.name: b.node for r in sim.cycles for b in r.result.binds}
    assert (nodes["first"] == nodes["second"]) is together


def test_init_containers_get_no_npu() -> None:
    """``ResourceReqs`` reads ``pod.Spec.Containers``: an init container's NPU limits ask
    nothing of deviceshare, and only the app container is in the allocation."""
    init = {"name": "prepare", "image": "busybox", "resources": {"limits": {COUNT: "1"}}}
    sim = run(
        npu_node("n1"),
        pod(
            "p", cpu=None, memory=None, limits={COUNT: "1", MEMORY: "1024"}, init_containers=[init]
        ),
    )
    ((bind,),) = [r.result.binds for r in sim.cycles]
    assert bind.annotations["hami.io/Ascend310P-devices-allocated"] == "n1-0,Ascend310P,3072,0:;"
    assert json.loads(bind.annotations[COUNT]) == [{"UUID": "n1-0", "temp": "vir01"}]
