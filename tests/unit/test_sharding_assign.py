"""Which nodes go to which NodeShard, after Volcano's sharding controller tests:
``sharding_manager_pipeline_test.go`` (``runPipeline``, ``dropAssigned``),
``sharding_boundary_test.go``, ``sharding_function_test.go`` and ``sharding_update_test.go``
(metrics from pod requests, writes),
``sharding_performance_test.go`` (batches) and ``configmap_reload_test.go`` (stale NodeShards),
with the controllers' fake clusters replaced by the values they end up computing."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pytest

from caldera.models.core import Node, Pod
from caldera.models.shard import NodeShard
from caldera.sharding.assign import (
    ShardWrite,
    assignment_needs_update,
    calculate_assignments,
    calculate_single_assignment,
    node_table,
    nodes_to_add_remove,
    shard_writes,
    stale_shards,
)
from caldera.sharding.assign_config import SchedulerConfig, parse_sharding_config
from caldera.sharding.assign_metrics import (
    node_changed,
    node_metrics,
    pod_resources_changed,
    utilization_changed,
)

WARMUP_LABEL = "node.volcano.sh/warmup"


def schedulers(text: str) -> tuple[SchedulerConfig, ...]:
    return parse_sharding_config(text).scheduler_configs


def default_test_schedulers(max_nodes: int = 10) -> tuple[SchedulerConfig, ...]:
    """``getDefaultTestSchedulerConfigs``."""
    return schedulers(
        "schedulerConfigs:\n"
        "  - {name: volcano-scheduler, type: volcano, cpuUtilizationMin: 0.0,"
        f" cpuUtilizationMax: 0.6, minNodes: 1, maxNodes: {max_nodes}}}\n"
        "  - {name: agent-scheduler, type: agent, cpuUtilizationMin: 0.7,"
        f" cpuUtilizationMax: 1.0, preferWarmupNodes: true, minNodes: 1, maxNodes: {max_nodes}}}\n"
    )


def node(name: str, cpu: str = "8", warmup: bool = False, allocatable: str | None = None) -> Node:
    """``CreateTestNode``."""
    labels = {WARMUP_LABEL: "true"} if warmup else {}
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": labels},
            "status": {
                "capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": allocatable or cpu, "memory": "32Gi", "pods": "110"},
            },
        }
    )


def pod(name: str, cpu: str, memory: str, phase: str = "Running", mirror: bool = False) -> Pod:
    """``CreateTestPod``."""
    annotations = {"kubernetes.io/config.mirror": "x"} if mirror else {}
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
                ]
            },
            "status": {"phase": phase},
        }
    )


Cluster = list[tuple[Node, list[Pod]]]


def assign_cluster(
    configs: Sequence[SchedulerConfig], cluster: Cluster, batch_size: int = 50
) -> dict[str, tuple[str, ...]]:
    """Measures every node from its pods and assigns: what ``syncShards`` computes."""
    labels = {n.metadata.name: n.metadata.labels for n, _ in cluster}
    util = {n.metadata.name: node_metrics(n, pods).cpu_utilization for n, pods in cluster}
    result = calculate_assignments(configs, node_table(labels, util), batch_size=batch_size)
    return {name: a.nodes for name, a in result.items()}


def assign(
    configs: Sequence[SchedulerConfig],
    labels: Mapping[str, Mapping[str, str]],
    util: Mapping[str, float],
) -> dict[str, tuple[str, ...]]:
    """The ranked lists (Volcano's ``NodesDesired`` order)."""
    result = calculate_assignments(configs, node_table(labels, util))
    return {name: a.ranked for name, a in result.items()}


def test_pipeline_filter_score_clamp() -> None:
    """``TestPipelineFilterScoreClamp``: allocation-rate weight 1 on [0, 0.6], warmup weight 2;
    n5/n6 over the range and n8 without metrics are filtered out."""
    configs = schedulers(
        "schedulerConfigs:\n  - name: vol\n    type: volcano\n    maxNodes: 5\n    policies:\n"
        "      - {name: allocation-rate, weight: 1,"
        " arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.6}}\n"
        "      - {name: warmup, weight: 2,"
        " arguments: {warmupLabel: warmup, warmupLabelValue: 'true'}}\n"
    )
    yes, no = {"warmup": "true"}, {"warmup": "false"}
    labels = {"n1": yes, "n2": no, "n3": yes, "n4": no, "n5": yes, "n6": no, "n7": yes, "n8": no}
    util = {"n1": 0.10, "n2": 0.55, "n3": 0.05, "n4": 0.40, "n5": 0.65, "n6": 0.90, "n7": 0.30}
    assert assign(configs, labels, util)["vol"] == ("n7", "n1", "n3", "n2", "n4")
    sorted_nodes = calculate_assignments(configs, node_table(labels, util))["vol"].nodes
    assert sorted_nodes == ("n1", "n2", "n3", "n4", "n7")


def test_pipeline_filter_and_intersection() -> None:
    """``TestPipelineFilterAndIntersection``: [0, 0.5] and [0.3, 1.0] keep only 0.4."""
    configs = schedulers(
        "schedulerConfigs:\n  - name: vol\n    maxNodes: 10\n    policies:\n"
        "      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.5}}\n"
        "      - {name: allocation-rate, arguments: {minCPUUtil: 0.3, maxCPUUtil: 1.0}}\n"
    )
    labels: dict[str, dict[str, str]] = {"low": {}, "mid": {}, "high": {}}
    assert assign(configs, labels, {"low": 0.2, "mid": 0.4, "high": 0.7})["vol"] == ("mid",)


def test_pipeline_no_filterer_skips_filter_phase() -> None:
    """``TestPipelineNoFiltererSkipsFilterPhase``: warmup only; every node passes, even one
    without metrics, warm-up first."""
    configs = schedulers(
        "schedulerConfigs:\n  - {name: vol, maxNodes: 10, policies: [{name: warmup, weight: 1}]}\n"
    )
    labels = {"c": {}, "b": {WARMUP_LABEL: "false"}, "a": {WARMUP_LABEL: "true"}}
    assert assign(configs, labels, {"b": 0.5, "c": 0.5})["vol"] == ("a", "b", "c")


def test_pipeline_weighted_sum() -> None:
    """``TestPipelineWeightedSum``: 10 × 0.6 beats 10 × 0 + 1 × 1."""
    configs = schedulers(
        "schedulerConfigs:\n  - name: vol\n    maxNodes: 10\n    policies:\n"
        "      - {name: allocation-rate, weight: 10,"
        " arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}\n"
        "      - {name: warmup, weight: 1,"
        " arguments: {warmupLabel: warmup, warmupLabelValue: 'true'}}\n"
    )
    labels = {"warmlow": {"warmup": "true"}, "regulhi": {"warmup": "false"}}
    ranked = assign(configs, labels, {"warmlow": 0.0, "regulhi": 0.6})["vol"]
    assert ranked == ("regulhi", "warmlow")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "schedulerConfigs:\n  - name: vol\n    policies:\n"
            "      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}\n"
            "      - {name: node-limit, arguments: {maxNodes: 2}}\n",
            id="TestPipelineClampHonored",
        ),
        pytest.param(
            "schedulerConfigs:\n  - name: vol\n    minNodes: 1\n    maxNodes: 2\n    policies:\n"
            "      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}\n",
            id="TestPipelineNodeLimitSynthesizedFromScalars",
        ),
        pytest.param(
            "schedulerConfigs:\n  - name: vol\n    policies:\n"
            "      - {name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}\n"
            "      - {name: node-limit, arguments: {maxNodes: 3}}\n"
            "      - {name: node-limit, arguments: {maxNodes: 2}}\n",
            id="runPipeline: selectors run in turn, the smaller cap holds",
        ),
    ],
)
def test_pipeline_clamp_honored(text: str) -> None:
    labels: dict[str, dict[str, str]] = {"a": {}, "b": {}, "c": {}, "d": {}}
    util = {"a": 0.4, "b": 0.8, "c": 0.2, "d": 0.6}
    assert assign(schedulers(text), labels, util)["vol"] == ("b", "d")


def test_pipeline_drop_assigned() -> None:
    """``TestPipelineDropAssigned``: the first scheduler takes both nodes, the second none."""
    rule = "{name: allocation-rate, arguments: {minCPUUtil: 0.0, maxCPUUtil: 1.0}}"
    configs = schedulers(
        f"schedulerConfigs:\n  - {{name: first, maxNodes: 10, policies: [{rule}]}}\n"
        f"  - {{name: second, maxNodes: 10, policies: [{rule}]}}\n"
    )
    got = assign(configs, {"x": {}, "y": {}}, {"x": 0.9, "y": 0.1})
    assert got == {"first": ("x", "y"), "second": ()}


def test_boundary_utilization() -> None:
    """``TestBoundaryUtilization``: 4000m of 8 cores is exactly 0.5 and goes above-50."""
    configs = schedulers(
        "schedulerConfigs:\n"
        "  - {name: below-50, type: volcano, cpuUtilizationMax: 0.49, minNodes: 1, maxNodes: 10}\n"
        "  - {name: above-50, type: agent, cpuUtilizationMin: 0.5, cpuUtilizationMax: 1.0,"
        " minNodes: 1, maxNodes: 10}\n"
    )
    cluster = [
        (node("node-exactly-0.5"), [pod("exactly-pod", "4000m", "4Gi")]),
        (node("node-just-below-0.5"), [pod("below-pod", "3900m", "4Gi")]),
        (node("node-just-above-0.5"), [pod("above-pod", "4100m", "4Gi")]),
    ]
    assert assign_cluster(configs, cluster) == {
        "below-50": ("node-just-below-0.5",),
        "above-50": ("node-exactly-0.5", "node-just-above-0.5"),
    }


def test_empty_cluster() -> None:
    """``TestEmptyCluster``: with no node both NodeShards are still created, empty; a node at
    half load then goes to volcano-scheduler."""
    configs = default_test_schedulers()
    empty = calculate_assignments(configs, node_table({}, {}))
    assert shard_writes(empty, {}) == [
        ShardWrite("agent-scheduler", True, (), (), ()),
        ShardWrite("volcano-scheduler", True, (), (), ()),
    ]
    got = assign_cluster(configs, [(node("empty-node"), [pod("empty-pod", "4000m", "4Gi")])])
    assert got == {"volcano-scheduler": ("empty-node",), "agent-scheduler": ()}


def test_max_utilization() -> None:
    """``TestMaxUtilization``: 10 cores requested of 8 is capped at 1.0 and goes to the agent."""
    over = node("over-node")
    pods = [pod("over-pod-1", "5000m", "5Gi"), pod("over-pod-2", "5000m", "5Gi")]
    assert node_metrics(over, pods).cpu_utilization == 1.0
    got = assign_cluster(default_test_schedulers(), [(over, pods)])
    assert got == {"volcano-scheduler": (), "agent-scheduler": ("over-node",)}


def test_node_metrics_calculation() -> None:
    """``TestNodeMetricsCalculation``: 3500m of 8 cores, 3.5Gi of 32Gi; finished pods and mirror
    pods do not count (``listPodsOnNode``); capacity, not allocatable, is the divisor."""
    pods = [
        pod("pod-1", "1000m", "1Gi"),
        pod("pod-2", "2000m", "2Gi"),
        pod("pod-3", "500m", "512Mi"),
        pod("done", "4", "4Gi", phase="Succeeded"),
        pod("failed", "4", "4Gi", phase="Failed"),
        pod("static", "4", "4Gi", mirror=True),
    ]
    metrics = node_metrics(node("test-node", warmup=True, allocatable="4"), pods)
    assert metrics.cpu_utilization == 0.4375
    assert metrics.memory_utilization == 0.109375
    assert metrics.is_warmup_node
    assert metrics.pod_count == 3
    assert node_metrics(node("no-capacity", cpu="0"), pods).cpu_utilization == 0.0


def test_pod_events_trigger_node_metrics_update() -> None:
    """``TestPodEventsTriggerNodeMetricsUpdate``: 0 → 0.1875 → 0.875; only a move of more than
    0.5 (or a node seen for the first time) re-runs the assignment
    (``isUtilizationSignificantlyChanged``)."""
    dynamic = node("dynamic-node")
    low = [pod("low-pod-1", "1000m", "1Gi"), pod("low-pod-2", "500m", "512Mi")]
    high = [*low, pod("high-pod-1", "3000m", "3Gi"), pod("high-pod-2", "2500m", "2Gi")]
    idle, light, busy = (node_metrics(dynamic, p) for p in ([], low, high))
    assert (idle.cpu_utilization, light.cpu_utilization, busy.cpu_utilization) == (0, 0.1875, 0.875)
    assert utilization_changed(None, idle)
    assert not utilization_changed(idle, light)
    assert utilization_changed(light, busy)
    assert not utilization_changed(busy, dataclasses.replace(busy, cpu_utilization=0.375))
    assert utilization_changed(busy, dataclasses.replace(busy, memory_utilization=0.9))


def shard(name: str, desired: Sequence[str], in_use: Sequence[str] = ()) -> NodeShard:
    return NodeShard.model_validate(
        {
            "metadata": {"name": name},
            "spec": {"nodesDesired": list(desired)},
            "status": {"nodesInUse": list(in_use)},
        }
    )


def test_node_addition_and_deletion() -> None:
    """``TestNodeAdditionAndDeletion``: the NodeShards written as nodes come and go (each
    scheduler having taken up its desired nodes, ``fakeShardInUse``)."""
    configs = default_test_schedulers()
    initial, new = node("initial-node", warmup=True), node("new-node")
    initial_pods = [pod("initial-pod-1", "6000m", "6Gi")]
    new_pods = [pod("new-pod-1", "1000m", "1Gi"), pod("new-pod-2", "500m", "512Mi")]

    def sync(cluster: Cluster, shards: dict[str, NodeShard]) -> list[ShardWrite]:
        labels = {n.metadata.name: n.metadata.labels for n, _ in cluster}
        util = {n.metadata.name: node_metrics(n, p).cpu_utilization for n, p in cluster}
        writes = shard_writes(calculate_assignments(configs, node_table(labels, util)), shards)
        for w in writes:  # the scheduler then uses what it is given
            shards[w.name] = shard(w.name, w.nodes_desired, w.nodes_desired)
        return writes

    shards: dict[str, NodeShard] = {}
    assert sync([(initial, initial_pods)], shards) == [
        ShardWrite("agent-scheduler", True, ("initial-node",), ("initial-node",), ()),
        ShardWrite("volcano-scheduler", True, (), (), ()),
    ]
    assert sync([(initial, initial_pods), (new, new_pods)], shards) == [
        ShardWrite("volcano-scheduler", False, ("new-node",), ("new-node",), ()),
    ]
    assert sync([(new, new_pods)], shards) == [
        ShardWrite("agent-scheduler", False, (), (), ("initial-node",)),
    ]
    assert sync([(new, new_pods)], shards) == []


@pytest.mark.parametrize(
    ("current", "desired", "changed"),
    [
        pytest.param(["a"], ["a", "b"], True, id="assignmentNeedsUpdate: node count differs"),
        pytest.param(["a", "b"], ["b", "a"], False, id="assignmentNeedsUpdate: same set, order"),
        pytest.param(["a", "b"], ["a", "c"], True, id="assignmentNeedsUpdate: threshold 1"),
        pytest.param(
            [f"n{i}" for i in range(20)],
            [f"n{i}" for i in range(19)] + ["x"],
            False,
            id="assignmentNeedsUpdate: 1 of 20 swapped, below max(1, 20/10)",
        ),
        pytest.param(
            [f"n{i}" for i in range(20)],
            [f"n{i}" for i in range(18)] + ["x", "y"],
            True,
            id="assignmentNeedsUpdate: 2 of 20 swapped reaches the threshold",
        ),
        pytest.param([], [], False, id="assignmentNeedsUpdate: both empty"),
    ],
)
def test_assignment_needs_update(current: list[str], desired: list[str], changed: bool) -> None:
    assert assignment_needs_update(current, desired) is changed
    write = shard_writes(
        {"s": calculate_single_assignment(default_test_schedulers()[0], node_table({}, {}))},
        {"s": shard("s", current)},
    )
    assert write == ([ShardWrite("s", False, (), (), ())] if current else [])


def test_find_nodes_to_add_remove() -> None:
    """``findNodesToAddRemove`` (what ``VerifyAssignmentUpdate`` reads), against nodesInUse."""
    assert nodes_to_add_remove(["a", "b", "c"], ["c", "d", "b"]) == (("d",), ("a",))
    assert shard_writes(
        calculate_assignments(default_test_schedulers(), node_table({"d": {}}, {"d": 0.1})),
        {"volcano-scheduler": shard("volcano-scheduler", ["a"], in_use=["a", "b"])},
    )[-1] == ShardWrite("volcano-scheduler", False, ("d",), ("d",), ("a", "b"))


def test_sync_shards_cleans_up_stale_node_shards_after_scheduler_removed() -> None:
    """``TestSyncShards_CleansUpStaleNodeShardsAfterSchedulerRemoved``."""
    configs = default_test_schedulers()
    result = calculate_assignments(configs, node_table({}, {}))
    shards = {n: shard(n, []) for n in ("agent-scheduler", "batch-scheduler", "volcano-scheduler")}
    assert stale_shards(shards, result) == ("batch-scheduler",)


def performance_cluster(count: int) -> Cluster:
    """``TestLargeClusterPerformance``'s nodes: every third a warm-up node, ten pods each."""
    cluster = []
    for i in range(count):
        base = 100 + (i % 8) * 100
        pods = [pod(f"pod-{i}-{j}", f"{base + j * 50}m", "1Gi") for j in range(10)]
        cluster.append((node(f"node-{i}", warmup=i % 3 == 0), pods))
    return cluster


def test_large_cluster_performance() -> None:
    """``TestLargeClusterPerformance``: most of 100 nodes are assigned, none twice. 61 nodes fit
    the agent (cpu 0.78 and up), 26 the volcano scheduler (0.41, 0.53), 13 neither (0.66); with
    ``maxNodes: 50`` the agent keeps all 61, since each batch of 50 nodes is capped on its own
    (``calculateShardAssignmentsBatched``), where one pass would stop at 50."""
    configs = default_test_schedulers(max_nodes=50)
    cluster = performance_cluster(100)
    got = assign_cluster(configs, cluster)
    agent, volcano = set(got["agent-scheduler"]), set(got["volcano-scheduler"])
    assert not agent & volcano
    assert len(agent) + len(volcano) > 50
    assert (len(agent), len(volcano)) == (61, 26)
    assert len(assign_cluster(configs, cluster, batch_size=0)["agent-scheduler"]) == 50


def test_batches_cap_each_batch_of_fifty_nodes() -> None:
    """``calculateShardAssignmentsBatched``: 120 nodes make batches of 50, 50 and 20, each
    ranked and capped on its own; one pass (``batch_size=0``) caps the whole shard."""
    configs = schedulers("schedulerConfigs:\n  - {name: s, cpuUtilizationMax: 1.0, maxNodes: 3}\n")
    names = [f"n{i:03d}" for i in range(120)]
    util = {name: (i % 50) / 100 for i, name in enumerate(names)}  # busiest last in each batch
    table = node_table({n: {} for n in names}, util)
    batched = calculate_assignments(configs, table)["s"].ranked
    assert batched == ("n049", "n048", "n047", "n099", "n098", "n097", "n119", "n118", "n117")
    single = calculate_assignments(configs, table, batch_size=0)["s"].ranked
    assert single == ("n049", "n099", "n048")
    small = node_table({n: {} for n in names[:50]}, util)
    assert len(calculate_assignments(configs, small)["s"].ranked) == 3  # 50 nodes: one batch


def test_ties_go_by_node_name_whatever_the_input_order() -> None:
    """Volcano breaks ties in informer order; here in name order, so results repeat."""
    configs = default_test_schedulers(max_nodes=2)
    names = ["c", "a", "d", "b"]
    forward = assign(configs, {n: {} for n in names}, dict.fromkeys(names, 0.3))
    backward = assign(configs, {n: {} for n in reversed(names)}, dict.fromkeys(names, 0.3))
    assert forward == backward == {"volcano-scheduler": ("a", "b"), "agent-scheduler": ()}


def test_duplicate_scheduler_names_share_the_last_entry() -> None:
    """``policyCache`` and the result map are keyed by name: both entries run the last entry's
    chain, the first entry's nodes are taken yet the result kept is the last entry's."""
    configs = schedulers(
        "schedulerConfigs:\n"
        "  - {name: s, cpuUtilizationMax: 1.0}\n"
        "  - {name: s, cpuUtilizationMax: 1.0, maxNodes: 1}\n"
    )
    got = assign(configs, {"a": {}, "b": {}, "c": {}}, {"a": 0.1, "b": 0.2, "c": 0.3})
    assert got == {"s": ("b",)}


def test_single_scheduler_assignment_ignores_other_shards() -> None:
    """``calculateSingleSchedulerAssignment``: no exclusivity, no batches."""
    configs = schedulers(
        "schedulerConfigs:\n"
        "  - {name: first, cpuUtilizationMax: 1.0}\n"
        "  - {name: second, cpuUtilizationMax: 1.0}\n"
    )
    table = node_table({"a": {}, "b": {}}, {"a": 0.5, "b": 0.7})
    assert calculate_assignments(configs, table)["second"].nodes == ()
    assert calculate_single_assignment(configs[1], table).ranked == ("b", "a")


def test_node_and_pod_change_triggers() -> None:
    """``isNodeSignificantlyChanged`` and ``podResourcesChanged``."""
    assert node_changed(node("n"), node("n", warmup=True))  # labels
    assert not node_changed(node("n", cpu="8"), node("n", cpu="12"))  # 4 / 9 cores
    assert node_changed(node("n", cpu="8"), node("n", cpu="13"))  # 5 / 9
    assert not node_changed(node("n", cpu="7500m"), node("n", cpu="8"))  # both 8 whole cores
    assert pod_resources_changed(pod("p", "1", "1Gi"), pod("p", "2", "1Gi"))
    assert not pod_resources_changed(pod("p", "1", "1Gi"), pod("p", "1000m", "1Gi"))
