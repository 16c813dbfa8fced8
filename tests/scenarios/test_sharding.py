"""Sessions of one instance among several (``caldera.sharding``): ``--node-selector`` places
only on the selected nodes, and a hash split gives every job and node to exactly one instance,
so instances that see the same cluster never place the same pod or fill the same node."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from builders import REGISTRY, Obj, node, pod, podgroup, policy, queue, state_of
from caldera.api.snapshot import Snapshot
from caldera.cache.snapshot import build_snapshot
from caldera.framework.cycle import run_cycle
from caldera.framework.intents import CycleResult
from caldera.models.shard import NodeShard
from caldera.sharding.ring import statefulset_members
from caldera.sharding.scope import Scope, parse_node_selector

POLICY = policy(None, REGISTRY)


def snapshot_of(objects: Sequence[Obj], scope: Scope) -> Snapshot:
    snapshot, _ = build_snapshot(
        state_of(objects),
        scheduler_names=["volcano"],
        now=2e9,
        session_id="s",
        bare_pods_in_memory=True,
        managed_resources=POLICY.managed_resources,
        scope=scope,
    )
    return snapshot


def session(objects: Sequence[Obj], scope: Scope) -> CycleResult:
    return run_cycle(snapshot_of(objects, scope), POLICY, REGISTRY)


def placed(result: CycleResult) -> dict[str, str]:
    return {b.name: b.node for b in result.binds}


def test_the_node_selector_places_only_on_nodes_with_a_selected_label() -> None:
    """Volcano's ``--node-selector role:train``: the two unlabelled nodes take nothing, and
    the pod the selected nodes cannot hold waits, counting only them."""
    nodes = [
        node("a", cpu="2", labels={"role": "train"}),
        node("b", cpu="2", labels={"role": "train"}),
        node("c", cpu="8"),
        node("d", cpu="8", labels={"role": "serving"}),
    ]
    pods = [pod(f"p{i}", cpu="1", created=1.9e9 + i) for i in range(4)]
    selector = Scope(parse_node_selector(["role:train"]))
    assert Counter(placed(session([*nodes, *pods], selector)).values()) == {"a": 2, "b": 2}
    big = session([*nodes, pod("big", cpu="3")], selector)
    assert placed(big) == {}
    (waiting,) = big.pod_conditions
    assert waiting.message == "0/2 nodes are available: 2 Insufficient cpu."


def test_pods_on_nodes_outside_the_scope_still_count_for_their_queue() -> None:
    """A running pod on another instance's node holds its queue's capability: the queue of 2
    cpus, 1 used on node c, takes one more pod on node a, not two."""
    capped = queue("q", capability={"cpu": "2"})
    running: list[Obj] = [
        podgroup("old", queue="q", phase="Running"),
        pod("held", group="old", node_name="c"),
    ]
    new: list[Obj] = [podgroup("new", queue="q", min_member=1)]
    new += [pod(f"p{i}", group="new", created=1.9e9 + i) for i in range(2)]
    nodes: list[Obj] = [node("a", cpu="8", labels={"role": "train"}), node("c", cpu="8")]
    objects: list[Obj] = [capped, *nodes, *running, *new]
    result = session(objects, Scope(parse_node_selector(["role:train"])))
    assert list(placed(result).values()) == ["a"]


def test_a_hash_split_places_every_pod_once_each_on_its_own_instances_nodes() -> None:
    nodes = [node(f"node-{i}", cpu="4") for i in range(6)]
    pods = [pod(f"job-{i}", cpu="1", created=1.9e9 + i) for i in range(12)]
    members = tuple(statefulset_members("caldera-0", 3))
    scopes = [Scope(frozenset(), me, members) for me in members]
    results = [session([*nodes, *pods], s) for s in scopes]
    seen: Counter[str] = Counter()
    for scope, result in zip(scopes, results, strict=True):
        for name, where in placed(result).items():
            seen[name] += 1
            assert scope.owns(name, []) and scope.node(where, {}), (scope.me, name, where)
    owners_with_nodes = {
        p.metadata.name
        for p in pods
        if any(s.owns(p.metadata.name, []) and any(s.node(n.metadata.name, {}) for n in nodes)
               for s in scopes)
    }  # fmt: skip
    assert seen == dict.fromkeys(owners_with_nodes, 1)


def test_another_instances_podgroup_gets_no_status_from_this_one() -> None:
    members = tuple(statefulset_members("caldera-0", 2))
    groups = [podgroup(f"pg-{i}") for i in range(8)]
    objects: list[Obj] = [node("n", cpu="8"), *groups]
    for me in members:
        scope = Scope(frozenset(), me, members)
        written = {st.name for st in session(objects, scope).podgroups}
        assert written == {g.metadata.name for g in groups if scope.owns(g.metadata.name, [])}


def node_shard(name: str, desired: list[str], in_use: list[str] | None = None) -> NodeShard:
    status = {"nodesInUse": in_use} if in_use is not None else {}
    return NodeShard.model_validate(
        {"metadata": {"name": name}, "spec": {"nodesDesired": desired}, "status": status}
    )


SHARDED: list[Obj] = [node("a", cpu="2"), node("b", cpu="2"), node("c", cpu="8")]


def test_hard_sharding_refuses_the_nodes_outside_the_shard_with_volcanos_reason() -> None:
    """``PredicateNodes`` in hard mode: the pod too big for a and b waits, though c could take
    it, and c says why."""
    scope = Scope(shard_mode="hard", shard_name="volcano")
    objects: list[Obj] = [*SHARDED, node_shard("volcano", ["a", "b"]), pod("big", cpu="3")]
    result = session(objects, scope)
    assert placed(result) == {}
    (waiting,) = result.pod_conditions
    assert waiting.message == (
        "0/3 nodes are available: 1 node isn't in scheduler node shard, 2 Insufficient cpu."
    )
    assert result.shard_status is not None and result.shard_status.nodes_in_use == ("a", "b")


def test_soft_sharding_fills_the_shard_first_then_the_other_nodes() -> None:
    """``prioritizeNodes`` in soft mode: a and b (the shard) take two pods each though c is the
    emptiest, and the fifth goes to c."""
    scope = Scope(shard_mode="soft", shard_name="volcano")
    pods = [pod(f"p{i}", cpu="1", created=1.9e9 + i) for i in range(5)]
    result = session([*SHARDED, node_shard("volcano", ["a", "b"]), *pods], scope)
    assert Counter(placed(result).values()) == {"a": 2, "b": 2, "c": 1}
    # only the bind onto the other shard's node asks the API server first
    assert {b.node: b.recheck for b in result.binds} == {"a": False, "b": False, "c": True}


def test_a_node_another_shard_still_uses_waits_until_it_is_let_go() -> None:
    """``getAvailableNodesFromShard``: b is desired here but still in use by the other shard;
    the status says it is to add."""
    scope = Scope(shard_mode="hard", shard_name="volcano")
    shards = [node_shard("volcano", ["a", "b"]), node_shard("agent", ["c"], in_use=["b", "c"])]
    pods = [pod(f"p{i}", cpu="1", created=1.9e9 + i) for i in range(3)]
    result = session([*SHARDED, *shards, *pods], scope)
    assert Counter(placed(result).values()) == {"a": 2}
    assert result.shard_status is not None
    assert (result.shard_status.nodes_in_use, result.shard_status.nodes_to_add) == (("a",), ("b",))


def job_ref(name: str) -> dict[str, Any]:
    """The owner reference a Volcano Job puts on its pods (the ring hashes its name)."""
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": name}


def test_a_hash_split_counts_the_other_instances_jobs_for_the_queues() -> None:
    """Queue shares hold for the cluster: another instance's running job (on its own node)
    holds the queue's capability here too, and its nodes count in the cluster's total; its
    pending pods are left to it, and its PodGroup is not written."""
    members = ("caldera-0", "caldera-1")
    me, other = (Scope(frozenset(), m, members) for m in members)
    mine = next(f"job-{i}" for i in range(100) if me.owns(f"job-{i}", []))
    theirs = next(f"job-{i}" for i in range(100) if other.owns(f"job-{i}", []))
    my_node = next(f"n{i}" for i in range(100) if me.node(f"n{i}", {}))
    their_node = next(f"n{i}" for i in range(100) if other.node(f"n{i}", {}))
    objects: list[Obj] = [
        queue("q", capability={"cpu": "2"}),
        node(my_node, cpu="8"),
        node(their_node, cpu="8"),
        podgroup(theirs, queue="q", phase="Running"),
        pod(f"{theirs}-0", group=theirs, node_name=their_node, owners=[job_ref(theirs)]),
        pod(f"{theirs}-1", group=theirs, created=1.9e9, owners=[job_ref(theirs)]),
        podgroup(mine, queue="q", phase="Inqueue"),
        *(
            pod(f"{mine}-{i}", group=mine, created=1.9e9 + i, owners=[job_ref(mine)])
            for i in range(2)
        ),
    ]
    result = session(objects, me)
    assert list(placed(result).values()) == [my_node]  # 1 cpu left under the capability of 2
    assert {st.name for st in result.podgroups} == {mine}
    assert [c.name for c in result.pod_conditions] == [f"{mine}-1"]


def test_the_first_replica_alone_writes_the_queues_status() -> None:
    members = ("caldera-0", "caldera-1")
    assert [Scope(frozenset(), m, members).writes_queues for m in members] == [True, False]
    assert Scope().writes_queues and not Scope(frozenset({"role:train"})).writes_queues


def test_a_podgroup_whose_pods_name_another_scheduler_is_neither_admitted_nor_written() -> None:
    """``caldera-b``'s PodGroup is ``caldera-b``'s: this instance leaves it Pending and writes
    no status to it, so two schedulers never overwrite each other's; a PodGroup no pod names
    yet is anyone's to admit, as Volcano's job controller needs before it creates the pods."""
    objects: list[Obj] = [
        node("n", cpu="8"),
        podgroup("theirs", min_member=2),
        *(pod(f"theirs-{i}", group="theirs", scheduler="caldera-b") for i in range(2)),
        podgroup("empty", min_member=2),
    ]
    result = session(objects, Scope())
    assert {st.name: st.phase for st in result.podgroups} == {"empty": "Inqueue"}
    assert placed(result) == {}


def test_another_schedulers_running_job_counts_for_its_queue() -> None:
    """Queue shares hold across schedulers: ``caldera-b``'s running pod holds 1 of the queue's
    2 cpus, so of this instance's two pods one is placed."""
    objects: list[Obj] = [
        queue("q", capability={"cpu": "2"}),
        node("a", cpu="8"),
        podgroup("theirs", queue="q", phase="Running"),
        pod("theirs-0", group="theirs", node_name="a", scheduler="caldera-b"),
        podgroup("mine", queue="q", min_member=1, phase="Inqueue"),
        *(pod(f"mine-{i}", group="mine", created=1.9e9 + i) for i in range(2)),
    ]
    result = session(objects, Scope())
    assert list(placed(result)) == ["mine-0"]
    assert {st.name for st in result.podgroups} == {"mine"}


@pytest.mark.parametrize(
    ("peers", "placed_here", "total_cpu"),
    [
        pytest.param(frozenset(), 2, 8.0, id="no peers: a bare pod of caldera-b only holds room"),
        pytest.param(
            frozenset({"caldera-b"}),
            1,
            16.0,
            id="caldera-b a peer: its bare pod holds queue q, its node counts for deserved",
        ),
    ],
)
def test_peers_count_each_others_bare_pods_and_nodes_for_the_queues(
    peers: frozenset[str], placed_here: int, total_cpu: float
) -> None:
    """``--node-selector role:train --peer-scheduler-name caldera-b``: the peer's running bare
    pod on its own node (grouped as this instance groups its own) holds its queue's capability,
    and the peer's node counts in the cluster's total."""
    scope = Scope(parse_node_selector(["role:train"]), peers=peers)
    in_q = {"scheduling.volcano.sh/queue-name": "q"}
    objects: list[Obj] = [
        queue("q", capability={"cpu": "2"}),
        node("a", cpu="8", labels={"role": "train"}),
        node("b", cpu="8", labels={"role": "infer"}),
        pod("theirs", node_name="b", scheduler="caldera-b", annotations=in_q, uid="t"),
        *(pod(f"mine-{i}", annotations=in_q, created=1.9e9 + i, uid=f"m{i}") for i in range(2)),
    ]
    assert len(placed(session(objects, scope))) == placed_here
    snapshot = snapshot_of(objects, scope)
    cpu = snapshot.space.index["cpu"]
    assert snapshot.total_allocatable()[cpu] == total_cpu * 1000


@pytest.mark.parametrize(
    ("scope", "writes"),
    [
        pytest.param(Scope(), True, id="the whole cluster"),
        pytest.param(Scope(frozenset({"role:train"})), False, id="a node selector, no peers"),
        pytest.param(Scope(shard_mode="soft"), False, id="a NodeShard, no peers"),
        pytest.param(
            Scope(frozenset({"role:train"}), name="caldera-a", peers=frozenset({"caldera-b"})),
            True,
            id="peers: the name that sorts first writes",
        ),
        pytest.param(
            Scope(shard_mode="hard", name="caldera-b", peers=frozenset({"caldera-a"})),
            False,
            id="peers: the others do not",
        ),
        pytest.param(
            Scope(frozenset(), "caldera-1", ("caldera-0", "caldera-1")),
            False,
            id="a hash split: the replicas after the first do not",
        ),
    ],
)
def test_who_writes_the_queues_status(scope: Scope, writes: bool) -> None:
    assert scope.writes_queues is writes
