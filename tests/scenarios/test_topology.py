"""Network-topology-aware gangs: HyperNode trees in, placements inside one HyperNode out.

The cluster of most cases is two leaf switches of four 4-cpu nodes under one spine
(volcano.md §1.4): ``leaf-a`` holds n0–n3, ``leaf-b`` n4–n7, ``spine`` both leaves. A job's
``networkTopology`` (§1.3) keeps it inside one HyperNode no higher than its tier bound (hard) or
prefers the lowest tier that fits (soft).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builders import (
    Obj,
    binds,
    default_policy_with,
    hypernode,
    node,
    pod,
    podgroup,
    scenario,
    state_of,
    summary,
)
from caldera.api.hypernode import build_tree
from caldera.cache.snapshot import build_snapshot
from caldera.cli import main
from caldera.simulate.runner import Simulation

NTA_POLICY = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: overcommit}
  - {name: drf}
  - {name: predicates}
  - {name: proportion}
  - {name: nodeorder}
  - {name: binpack}
  - {name: network-topology-aware}
"""

LEAF_A = [f"n{i}" for i in range(4)]
LEAF_B = [f"n{i}" for i in range(4, 8)]


def two_leaves(*, cpu: str = "4") -> list[Obj]:
    """Two leaves of four ``cpu``-cpu nodes under one spine."""
    return [
        *(node(n, cpu=cpu) for n in LEAF_A + LEAF_B),
        hypernode("leaf-a", tier=1, nodes=LEAF_A, tier_name="leaf"),
        hypernode("leaf-b", tier=1, nodes=LEAF_B, tier_name="leaf"),
        hypernode("spine", tier=2, hypernodes=["leaf-a", "leaf-b"], tier_name="spine"),
    ]


def gang(
    name: str, size: int, *, cpu: str = "3", topology: dict[str, Any] | None = None
) -> list[Obj]:
    topo = {"mode": "hard", "highestTierAllowed": 1} if topology is None else topology
    return [
        podgroup(name, min_member=size, network_topology=topo),
        *(pod(f"{name}-{i}", group=name, cpu=cpu) for i in range(size)),
    ]


def placed(sim: Simulation, job: str) -> dict[str, str]:
    return {p: n for p, n in binds(sim).items() if p.startswith(f"default/{job}-")}


def unschedulable(sim: Simulation, pg: str) -> str:
    conds = {c["type"]: c for c in summary(sim)["podGroups"][f"default/{pg}"]["conditions"]}
    message: str = conds["Unschedulable"]["message"]
    return message


def test_a_hard_tier_1_gang_lands_inside_one_leaf() -> None:
    sim = scenario([*two_leaves(), pod("busy", cpu="3", node_name="n0"), *gang("g", 4)])
    assert set(placed(sim, "g").values()) == set(LEAF_B)


def test_a_gang_that_no_leaf_can_hold_waits_and_says_which_tier_failed() -> None:
    sim = scenario([*two_leaves(), *gang("g", 5)])
    assert placed(sim, "g") == {}
    message = unschedulable(sim, "g")
    assert "network topology (hard, tier ≤ 1)" in message
    assert "tier 1 (leaf): 2 HyperNodes, none fits (2 × no room for all the pods (at most 4))" in (
        message
    )


def test_a_leaf_without_the_free_resources_is_named_for_the_resource() -> None:
    sim = scenario([*two_leaves(), *gang("g", 6, cpu="3")])
    message = unschedulable(sim, "g")
    assert "2 × not enough free resources" in message


def test_a_gang_allowed_up_to_the_spine_spans_both_leaves() -> None:
    sim = scenario([*two_leaves(), *gang("g", 5, topology={"highestTierAllowed": 2})])
    assert len(placed(sim, "g")) == 5


def test_highest_tier_name_bounds_the_search_like_the_tier_number() -> None:
    by_name = scenario([*two_leaves(), *gang("g", 5, topology={"highestTierName": "leaf"})])
    assert placed(by_name, "g") == {}
    spine = scenario([*two_leaves(), *gang("g", 5, topology={"highestTierName": "spine"})])
    assert len(placed(spine, "g")) == 5


def test_an_unknown_tier_name_is_the_reason_the_gang_waits() -> None:
    sim = scenario([*two_leaves(), *gang("g", 2, topology={"highestTierName": "pod"})])
    assert placed(sim, "g") == {}
    assert "no HyperNode tier is named 'pod'" in unschedulable(sim, "g")


def test_a_hard_gang_waits_when_the_cluster_has_no_hypernodes() -> None:
    sim = scenario([*(node(n) for n in LEAF_A), *gang("g", 2)])
    assert placed(sim, "g") == {}
    assert "no HyperNode of such a tier exists" in unschedulable(sim, "g")


def test_a_soft_gang_prefers_a_leaf_that_fits() -> None:
    objs = [*two_leaves(), pod("busy", cpu="1", node_name="n0")]
    sim = scenario([*objs, *gang("g", 3, topology={"mode": "soft"})])
    nodes = set(placed(sim, "g").values())
    assert len(nodes) == 3 and (nodes <= set(LEAF_A) or nodes <= set(LEAF_B))


def test_a_soft_gang_falls_back_to_the_whole_cluster() -> None:
    objs = [*two_leaves(), hypernode("spine", tier=2, hypernodes=["leaf-a"])]
    sim = scenario([*objs, *gang("g", 6, topology={"mode": "soft", "highestTierAllowed": 1})])
    assert len(placed(sim, "g")) == 6


def test_a_fragmented_leaf_is_ruled_out_before_any_trial() -> None:
    # leaf-a has 10 cpu free in all (enough for three 3-cpu pods by the sum) but 2 per node
    busy = [pod(f"busy{i}", cpu="2", node_name=n) for i, n in enumerate(LEAF_A[:3])]
    sim = scenario([*two_leaves(), *busy, *gang("g", 3), *gang("h", 3)])
    assert set(placed(sim, "g").values()) <= set(LEAF_B)
    assert placed(sim, "h") == {}
    message = unschedulable(sim, "h")
    assert "1 × no room for all the pods (at most 1)" in message


def test_a_gang_is_all_or_nothing_when_its_leaf_rejects_a_pod() -> None:
    # leaf-a has the room by numbers, but one of its nodes is cordoned: leaf-b takes the gang
    objs: list[Obj] = [
        *(node(n, unschedulable=(n == "n0")) for n in LEAF_A),
        *(node(n) for n in LEAF_B),
        hypernode("leaf-a", tier=1, nodes=LEAF_A),
        hypernode("leaf-b", tier=1, nodes=LEAF_B),
    ]
    sim = scenario([*objs, *gang("g", 4)])
    assert set(placed(sim, "g").values()) == set(LEAF_B)


def test_a_running_gang_grows_only_inside_the_leaf_it_runs_in() -> None:
    running: list[Obj] = [
        podgroup("g", min_member=1, phase="Running", network_topology={"highestTierAllowed": 1}),
        pod("g-0", group="g", cpu="3", node_name="n0"),
        pod("g-1", group="g", cpu="3"),
        pod("g-2", group="g", cpu="3"),
    ]
    sim = scenario([*two_leaves(), *running])
    assert set(placed(sim, "g").values()) <= set(LEAF_A)
    assert len(placed(sim, "g")) == 2


def test_the_binpack_score_chooses_the_fuller_leaf() -> None:
    objs = [*two_leaves(), pod("busy", cpu="1", node_name="n5")]
    sim = scenario([*objs, *gang("g", 2)], policy_yaml=NTA_POLICY)
    assert set(placed(sim, "g").values()) <= set(LEAF_B)


def test_gang_pods_fill_the_leaf_of_their_first_pod_before_another() -> None:
    objs = [*two_leaves(), *gang("g", 4, cpu="1", topology={"highestTierAllowed": 2})]
    sim = scenario(objs, policy_yaml=NTA_POLICY)
    nodes = set(placed(sim, "g").values())
    assert nodes <= set(LEAF_A) or nodes <= set(LEAF_B)


def test_ordinary_pods_pack_into_the_busier_hypernode() -> None:
    objs = [*two_leaves(), pod("busy", cpu="2", node_name="n6"), pod("p", cpu="1")]
    sim = scenario(objs, policy_yaml=NTA_POLICY)
    assert binds(sim)["default/p"] in LEAF_B


def test_bare_pods_take_their_topology_from_annotations() -> None:
    notes = {
        "volcano.sh/network-topology-mode": "hard",
        "volcano.sh/network-topology-highest-tier": "1",
    }
    objs: list[Obj] = [*(node(n) for n in LEAF_A), pod("p", cpu="1", annotations=notes)]
    sim = scenario(objs)
    assert binds(sim) == {}


def test_the_chosen_hypernode_is_in_the_json_report() -> None:
    sim = scenario([*two_leaves(), *gang("g", 2)])
    assert summary(sim)["podGroups"]["default/g"]["hyperNode"] in ("leaf-a", "leaf-b")


# -- the tree ------------------------------------------------------------------------------------


def tree_of(objs: list[Obj]) -> tuple[Any, list[tuple[str, str]]]:
    state = state_of(objs)
    names = sorted(state.nodes)
    labels = {n: state.nodes[n].metadata.labels for n in names}
    return build_tree(state.hypernodes, labels, {n: i for i, n in enumerate(names)}, len(names))


def test_members_resolve_by_name_regex_labels_and_nesting() -> None:
    objs: list[Obj] = [
        node("gpu-0", labels={"rack": "r1"}),
        node("gpu-1", labels={"rack": "r1"}),
        node("cpu-0", labels={"rack": "r2"}),
        hypernode("by-regex", tier=1, regex="^gpu-"),
        hypernode("by-label", tier=1, labels={"rack": "r2"}),
        hypernode("top", tier=2, hypernodes=["by-regex", "by-label"]),
    ]
    tree, problems = tree_of(objs)
    assert problems == []
    assert tree.node_counts == {"by-label": 1, "by-regex": 2, "top": 3}
    assert tree.tiers == [1, 2]


def test_a_node_in_two_hypernodes_of_one_tier_drops_the_later_one() -> None:
    objs: list[Obj] = [
        node("n0"),
        hypernode("a", tier=1, nodes=["n0"]),
        hypernode("b", tier=1, nodes=["n0"]),
    ]
    tree, problems = tree_of(objs)
    assert tree.names == ["a"]
    assert problems == [
        ("b", "node n0 is also in HyperNode a of tier 1; this HyperNode is ignored")
    ]


def test_a_membership_cycle_is_reported_on_each_hypernode_and_ignored() -> None:
    objs: list[Obj] = [
        node("n0"),
        hypernode("a", tier=2, hypernodes=["b"], nodes=["n0"]),
        hypernode("b", tier=3, hypernodes=["a"]),
    ]
    tree, problems = tree_of(objs)
    assert tree.names == []
    assert {name for name, _ in problems} == {"a", "b"}
    assert all("form a cycle (a → b → a)" in text for _, text in problems)


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ({"type": "Switch", "selector": {"exactMatch": {"name": "x"}}}, "type 'Switch' is not"),
        ({"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}, "does not compile"),
        (
            {"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"a": "b"}}}},
            "labelMatch applies only to members of type Node",
        ),
        ({"type": "HyperNode", "selector": {"exactMatch": {"name": "nope"}}}, "does not exist"),
        ({"type": "Node"}, "no selector; member ignored"),  # the CRD leaves the selector optional
        (
            {
                "type": "Node",
                "selector": {
                    "labelMatch": {"matchExpressions": [{"key": "z", "operator": "Near"}]}
                },
            },
            (
                "labelMatch.matchExpressions[0].operator: Invalid enum value 'Near' (expected "
                "'DoesNotExist' or 'Exists' or 'In' or 'NotIn')"
            ),
        ),
    ],
)
def test_a_bad_member_is_reported_and_the_rest_of_the_hypernode_kept(
    member: dict[str, Any], reason: str
) -> None:
    objs: list[Obj] = [node("n0"), hypernode("h", tier=1, nodes=["n0"], members=[member])]
    tree, problems = tree_of(objs)
    assert tree.node_counts == {"h": 1}
    assert len(problems) == 1 and problems[0][0] == "h" and reason in problems[0][1]
    assert problems[0][1].startswith("spec.members[1]: ")


def test_a_member_hypernode_of_a_tier_not_below_its_parent_is_ignored() -> None:
    objs: list[Obj] = [
        node("n0"),
        hypernode("leaf", tier=2, nodes=["n0"]),
        hypernode("top", tier=2, hypernodes=["leaf"]),
    ]
    tree, problems = tree_of(objs)
    assert tree.node_counts == {"leaf": 1, "top": 0}
    assert problems == [
        (
            "top",
            "member HyperNode leaf has tier 2, not below this HyperNode's tier 2; member ignored",
        )
    ]


def test_tree_problems_reach_the_snapshot_problems() -> None:
    objs: list[Obj] = [
        node("n0"),
        hypernode("a", tier=1, nodes=["n0"]),
        hypernode("b", tier=1, nodes=["n0"]),
    ]
    _, problems = build_snapshot(state_of(objs), scheduler_names=["volcano"], now=0, session_id="t")
    assert [(p.kind, p.name) for p in problems] == [("HyperNode", "b")]


def test_not_ready_nodes_count_in_the_status_but_take_no_pods() -> None:
    objs: list[Obj] = [node("n0"), node("n1", ready=False), hypernode("h", tier=1, regex="n")]
    snapshot, _ = build_snapshot(state_of(objs), scheduler_names=["volcano"], now=0, session_id="t")
    tree = snapshot.hypernodes
    assert tree is not None
    assert tree.node_counts == {"h": 2}
    assert tree.rows[0].tolist() == [0]


# -- the command line ----------------------------------------------------------------------------

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n0}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-a}
spec:
  tier: 1
  tierName: leaf
  members: [{type: Node, selector: {regexMatch: {pattern: "^n[01]$"}}}]
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-b}
spec: {tier: 1, tierName: leaf, members: [{type: Node, selector: {exactMatch: {name: n2}}}]}
"""


POD = """apiVersion: v1
kind: Pod
metadata:
  name: train-{i}
  namespace: default
  annotations: {{scheduling.k8s.io/group-name: train}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def train(size: int, cpu: str) -> str:
    """A PodGroup ``train`` (hard, tier 1) of ``size`` pods asking ``cpu`` each."""
    group = (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: train, namespace: default}\n"
        f"spec: {{minMember: {size}, networkTopology: {{mode: hard, highestTierAllowed: 1}}}}\n"
    )
    return "---\n".join([group, *(POD.format(i=i, cpu=cpu) for i in range(size))])


def cluster_file(tmp_path: Path, *docs: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text("---\n".join([CLUSTER, *docs]))
    return str(path)


def test_explain_walks_the_tier_search_of_a_gang_that_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "train-0", cluster_file(tmp_path, train(3, "3"))]) == 0
    out = capsys.readouterr().out
    assert "network topology (hard, tier ≤ 1): no HyperNode can hold the job" in out
    assert "tier 1 (leaf): 2 HyperNodes; 2 ruled out without a trial, 0 tried" in out
    assert "leaf-a: not enough free resources (cpu 8 free of 9 needed)" in out
    assert "leaf-b: not enough free resources (cpu 4 free of 9 needed)" in out


def test_explain_names_the_hypernode_a_gang_would_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["explain", "--output", "json", "train-0", cluster_file(tmp_path, train(2, "3"))]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["topology"]["hyperNode"] == "leaf-a"
    assert doc["verdict"] in ("bound to n0", "bound to n1")


def test_simulate_reads_hypernodes_and_reports_the_chosen_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster_file(tmp_path, train(2, "3"))
    assert main(["simulate", "--output", "json", path]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["podGroups"]["default/train"]["hyperNode"] == "leaf-a"
    assert {b["node"] for b in doc["binds"]} == {"n0", "n1"}


# -- sub-groups ------------------------------------------------------------------------------------

THREE_LEAVES = [f"n{i}" for i in range(6)]


def three_leaves() -> list[Obj]:
    """Three leaves of two 4-cpu nodes."""
    return [
        *(node(n) for n in THREE_LEAVES),
        *(hypernode(f"leaf-{k}", tier=1, nodes=THREE_LEAVES[2 * k : 2 * k + 2]) for k in range(3)),
    ]


def grouped_job(
    sizes: dict[str, int],
    *,
    min_member: int,
    min_sub_groups: int = 0,
    size: int = 2,
    cpu: dict[str, str] | None = None,
) -> list[Obj]:
    """A job whose pods are labelled ``replica=<name>``; one subGroupPolicy splits them by that
    label into sub-groups of ``size`` that must each fit one leaf."""
    policy: dict[str, Any] = {
        "name": "tp",
        "subGroupSize": size,
        "matchLabelKeys": ["replica"],
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    if min_sub_groups:
        policy["minSubGroups"] = min_sub_groups
    pods = [
        pod(f"j-{r}-{i}", group="j", cpu=(cpu or {}).get(r, "3"), labels={"replica": r})
        for r, n in sizes.items()
        for i in range(n)
    ]
    return [podgroup("j", min_member=min_member, sub_group_policy=[policy]), *pods]


def leaf_of(node_name: str) -> int:
    return THREE_LEAVES.index(node_name) // 2


def test_each_sub_group_lands_inside_one_leaf_of_its_own() -> None:
    sim = scenario([*three_leaves(), *grouped_job({"a": 2, "b": 2}, min_member=4)])
    got = placed(sim, "j")
    assert len(got) == 4
    for replica in ("a", "b"):
        leaves = {leaf_of(n) for p, n in got.items() if p.startswith(f"default/j-{replica}-")}
        assert len(leaves) == 1


def test_a_sub_group_that_no_leaf_can_hold_waits_while_the_rest_run() -> None:
    job = grouped_job({"a": 2, "b": 2}, min_member=2, cpu={"b": "5"})
    objs = [*three_leaves(), *job]
    sim = scenario(objs)
    got = placed(sim, "j")
    assert set(got) == {"default/j-a-0", "default/j-a-1"}
    conditions = {c.name: c.message for c in sim.cycles[0].result.pod_conditions}
    assert conditions["j-b-0"].startswith("sub-group tp-b: network topology (hard, tier ≤ 1)")


def test_min_sub_groups_holds_the_job_until_enough_sub_groups_fit() -> None:
    # only two leaves: three sub-groups cannot all be whole, and all three are required
    objs = [*three_leaves()[:4], hypernode("leaf-0", tier=1, nodes=["n0", "n1"])]
    objs += [hypernode("leaf-1", tier=1, nodes=["n2", "n3"])]
    job = grouped_job({"a": 2, "b": 2, "c": 2}, min_member=2, min_sub_groups=3)
    assert placed(scenario([*objs, *job]), "j") == {}
    two = grouped_job({"a": 2, "b": 2, "c": 2}, min_member=2, min_sub_groups=2)
    assert len(placed(scenario([*objs, *two]), "j")) == 4


def test_best_effort_pods_of_a_hard_gang_stay_inside_its_leaf() -> None:
    objs: list[Obj] = [
        *two_leaves(),
        pod("busy", cpu="3", node_name="n0"),
        *gang("g", 4),
        pod("g-sidecar", group="g", cpu=None, memory=None),
    ]
    got = placed(scenario(objs), "g")
    assert "default/g-sidecar" in got
    assert set(got.values()) <= set(LEAF_A) or set(got.values()) <= set(LEAF_B)


def test_backfill_keeps_a_running_hard_jobs_best_effort_pod_in_its_leaf() -> None:
    running: list[Obj] = [
        podgroup("g", min_member=1, phase="Running", network_topology={"highestTierAllowed": 1}),
        pod("g-0", group="g", cpu="3", node_name="n5"),
        pod("g-extra", group="g", cpu=None, memory=None),
    ]
    full_b = [pod(f"b{i}", cpu="4", node_name=n) for i, n in enumerate(LEAF_B) if n != "n5"]
    only_backfill = default_policy_with(actions="enqueue, backfill")
    sim = scenario([*two_leaves(), *full_b, *running], policy_yaml=only_backfill)
    assert binds(sim)["default/g-extra"] in LEAF_B
