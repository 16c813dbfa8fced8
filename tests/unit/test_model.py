"""The model kept between sessions hands each session what a build from nothing would.

The session process keeps a :class:`~caldera.model.Model` and applies each session only what
changed. These tests drive a cluster through random change streams (pods arriving, binding,
finishing, resized, terminating, deleted; bare pods of one controller sharing a group; PodGroups,
queues, nodes, priority classes and the resource space changing), with binds in flight and the
last session's evictions overlaid as the operator overlays them, a process restart and a policy
change on the way, and compare at every session the model's snapshot with one built from nothing,
then the decisions and statuses a session takes on each.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from builders import (
    REGISTRY,
    Obj,
    card,
    gpu,
    gpu_node,
    node,
    pod,
    podgroup,
    policy,
    queue,
    state_of,
    with_containers,
)
from caldera.api.jobtable import partition
from caldera.api.snapshot import Snapshot
from caldera.cache.snapshot import BuildMemo, build_snapshot
from caldera.cache.state import Changes, ClusterState
from caldera.framework.cycle import run_cycle
from caldera.framework.intents import CycleResult
from caldera.model import Model
from caldera.models.parse import ObjectError
from caldera.operator.watch.assume import InFlight, changed_pods
from caldera.sharding.scope import Scope
from changes import Stream, differences, snapshot_view

TIERS = """
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""
POLICIES = [
    policy('actions: "enqueue, allocate, backfill, preempt, reclaim"' + TIERS),
    policy(
        """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}]
"""
    ),
    policy('actions: "allocate, backfill"' + TIERS),
    policy(
        """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf, enableHierarchy: true}, {name: predicates}, {name: nodeorder}]
"""
    ),
]


PEERS = Scope(peers=frozenset({"peer"}))
"""Pods of the scheduler ``peer`` count as its instance's; ``other``'s only as room held."""


def fresh(
    state: ClusterState, bare: bool, managed: frozenset[str] = frozenset()
) -> tuple[Snapshot, list[ObjectError]]:
    return build_snapshot(
        state,
        scheduler_names=["volcano"],
        now=1_800_000_000.0,
        session_id="s",
        memo=BuildMemo(),
        bare_pods_in_memory=bare,
        managed_resources=managed,
        scope=PEERS,
    )


def decisions(result: CycleResult) -> dict[str, object]:
    return {
        "binds": [(b.name, b.node) for b in result.binds],
        "evictions": [e.name for e in result.evictions],
        "pod_conditions": result.pod_conditions,
        "podgroups": result.podgroups,
        "queues": result.queues,
        "workload_groups": result.workload_groups,
    }


def new_model(bare: bool, every: int = 0) -> Model:
    return Model(
        scheduler_names=["volcano"],
        default_queue="default",
        bare_pods_in_memory=bare,
        full_rebuild_every=every,
        scope=PEERS,
    )


@pytest.mark.parametrize("bare", [True, False], ids=["bare pods in memory", "PodGroups only"])
@pytest.mark.parametrize("seed", range(12))
def test_the_models_snapshot_and_decisions_equal_a_fresh_builds_at_every_session(
    seed: int, bare: bool
) -> None:
    stream = Stream(seed, uids=True, in_place=True, others=True)
    rng = random.Random(seed)
    model = new_model(bare)
    evicting: list[str] = []
    by_changes = 0
    for step in range(80):
        what = stream.step()
        if step == 50:
            model = new_model(bare)  # the session process restarted
        state = stream.state
        pending = sorted(k for k, p in state.pods.items() if not p.spec.node_name)
        in_flight: InFlight = {  # binds the writers have not confirmed yet
            k: (rng.choice(sorted(state.nodes)), {})
            for k in rng.sample(pending, min(len(pending), rng.choice([0, 0, 1, 2])))
            if state.nodes
        }
        evicting = [k for k in evicting if k in state.pods]
        view = replace(state, pods={**state.pods, **changed_pods(state.pods, in_flight, evicting)})
        ours, problems = model.snapshot(
            view, now=1_800_000_000.0, session_id="s", overlay=[*in_flight, *evicting]
        )
        by_changes += model.last_build == "changes"
        theirs, fresh_problems = fresh(view, bare)
        mine, built = snapshot_view(ours), snapshot_view(theirs)
        assert mine == built, (step, what, model.last_build, differences(mine, built))
        assert problems == fresh_problems, (step, what)
        assert ours.active is not None
        assert set(ours.active) == set(partition(theirs.space, theirs.jobs)[0]), (step, what)
        pol = POLICIES[step // 20 % len(POLICIES)]  # the policy is reloaded now and then
        a = run_cycle(ours, pol, REGISTRY)
        b = run_cycle(theirs, pol, REGISTRY)
        assert decisions(a) == decisions(b), (step, what, model.last_build)
        evicting = [f"{e.namespace}/{e.name}" for e in a.evictions]
    assert by_changes > 40  # most sessions were made from the changes alone


@pytest.mark.parametrize("bare", [True, False], ids=["bare pods in memory", "PodGroups only"])
@pytest.mark.parametrize("seed", range(6))
def test_pods_made_ahead_while_they_are_listed_give_a_fresh_builds_snapshot(
    seed: int, bare: bool
) -> None:
    # a restart: the pods are made ahead page by page while the listing goes on, some of them
    # in a version that changes or goes before the listing ends, then the model is built
    stream = Stream(seed, uids=True, in_place=True)
    for _ in range(25):
        stream.step()
    earlier = dict(stream.state.pods)
    for _ in range(10):
        stream.step()
    state = stream.state
    model = new_model(bare)
    # and one deleted before the listing ended that alone asked for a resource
    gone = state_of([pod("gone", extra={"example.com/dongle": "1"}, uid="u-gone")]).pods
    listed = [*gone.items(), *earlier.items(), *state.pods.items()]
    for start in range(0, len(listed), 7):
        model.prepare(state, dict(listed[start : start + 7]), frozenset())
    ours, problems = model.snapshot(state, now=1_800_000_000.0, session_id="s")
    theirs, fresh_problems = fresh(state, bare)
    mine, built = snapshot_view(ours), snapshot_view(theirs)
    assert mine == built, differences(mine, built)
    assert problems == fresh_problems
    a, b = run_cycle(ours, POLICIES[0], REGISTRY), run_cycle(theirs, POLICIES[0], REGISTRY)
    assert decisions(a) == decisions(b)


def test_a_pod_arriving_on_a_busy_cluster_visits_only_that_pod_and_its_job() -> None:
    objs: list[Obj] = [node(f"n{i}", cpu="8", memory="16Gi") for i in range(4)]
    objs += [
        pod(f"run-{i}", cpu="100m", node_name=f"n{i % 4}", phase="Running", uid=f"u{i}")
        for i in range(40)
    ]
    objs.append(queue("default", weight=1))
    state = state_of(objs)
    model = new_model(bare=True)
    first, _ = model.snapshot(state, now=1.0, session_id="s1")
    assert model.last_build == "full"
    assert first.active == {} and first.settled is not None and len(first.settled) == 40
    run_cycle(first, POLICIES[0], REGISTRY)
    state.add(pod("new", cpu="1", uid="u-new"))
    second, _ = model.snapshot(state, now=2.0, session_id="s2", changed=["default/new"])
    assert model.last_build == "changes"
    assert second.active is not None and list(second.active) == ["default/podgroup-u-new"]
    result = run_cycle(second, POLICIES[0], REGISTRY)
    assert [b.name for b in result.binds] == ["new"]
    # the running jobs were taken over as they were: the same objects
    assert all(second.jobs[k] is first.jobs[k] for k in first.jobs)


def test_a_podgroup_arriving_or_changing_reclassifies_only_the_pods_that_name_it() -> None:
    objs: list[Obj] = [node("n1", cpu="8", memory="16Gi"), queue("default", weight=1)]
    objs += [
        pod(f"run-{i}", cpu="100m", memory="100Mi", node_name="n1", phase="Running", uid=f"u{i}")
        for i in range(20)
    ]
    objs += [pod(f"g-{i}", group="gang", cpu="1", uid=f"g{i}") for i in range(2)]
    state = state_of(objs)
    model = new_model(bare=True)
    first, _ = model.snapshot(state, now=1.0, session_id="s1")
    assert first.held.keys() == {"default/g-0", "default/g-1"}  # the PodGroup is not there yet
    state.add(podgroup("gang", min_member=2))
    second, _ = model.snapshot(state, now=2.0, session_id="s2", changed=[])
    assert model.last_build == "changes"  # a PodGroup is news for its pods, not for all
    assert not second.held
    assert second.active is not None and list(second.active) == ["default/gang"]
    assert snapshot_view(second) == snapshot_view(fresh(state, bare=True)[0])
    result = run_cycle(second, POLICIES[2], REGISTRY)
    assert sorted(b.name for b in result.binds) == ["g-0", "g-1"]


def test_the_worker_tells_the_model_which_pods_its_changes_touch() -> None:
    changes = Changes(
        tables={"pods": ({"default/a": "{}"}, ["default/b"]), "nodes": ({"n1": "{}"}, [])},
        bound={"default/c": "n1"},
        annotated={"default/d": {}},
    )
    assert changes.pod_keys() == {"default/a", "default/b", "default/c", "default/d"}
    assert Changes(full=True).pod_keys() is None  # the whole state: the model compares all


def test_every_nth_session_builds_from_nothing_and_zero_means_never() -> None:
    state = state_of([node("n1"), queue("default", weight=1), pod("a", node_name="n1")])
    model = new_model(bare=True, every=3)
    builds = []
    for i in range(7):
        model.snapshot(state, now=float(i), session_id=str(i))
        builds.append(model.last_build)
    assert builds == ["full", "changes", "full", "changes", "changes", "full", "changes"]
    never = new_model(bare=True, every=0)
    for i in range(5):
        never.snapshot(state, now=float(i), session_id=str(i))
    assert never.last_build == "changes"


GPU_POLICY = policy(
    """
actions: "enqueue, allocate, backfill, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: predicates}
  - {name: proportion}
  - {name: nodeorder}
  - {name: deviceshare, arguments: {deviceshare.VGPUEnable: true}}
"""
)


@pytest.mark.parametrize("seed", range(4))
def test_shared_gpus_counted_from_rows_kept_across_sessions_equal_a_fresh_count(seed: int) -> None:
    # deviceshare keeps each node row's card usage while the row's pods are the same objects;
    # GPU pods arrive, are bound with HAMi's annotations, finish and go
    rng = random.Random(seed)
    objs: list[Obj] = [queue("default", weight=1)]
    objs += [
        gpu_node(f"g{i}", card(f"GPU-{i}a", 16000), card(f"GPU-{i}b", 16000)) for i in range(4)
    ]
    state = state_of(objs)
    model = new_model(bare=True)
    serial = 0
    for step in range(40):
        for _ in range(rng.choice([0, 1, 2])):
            serial += 1
            priority = rng.choice([None, 1000])
            state.add(
                with_containers(
                    pod(f"p{serial}", uid=f"u{serial}", priority=priority),
                    gpu(rng.choice([4000, 8000, 12000])),
                )
            )
        running = sorted(k for k, p in state.pods.items() if p.spec.node_name)
        for key in rng.sample(running, min(len(running), rng.choice([0, 0, 1]))):
            if rng.random() < 0.5:
                del state.pods[key]
            else:
                old = state.pods[key]
                status = old.status.model_copy(update={"phase": "Succeeded"})
                state.pods[key] = old.model_copy(update={"status": status})
        managed = GPU_POLICY.managed_resources
        ours, _ = model.snapshot(state, now=1.8e9, session_id="s", managed_resources=managed)
        theirs, _ = fresh(state, True, managed)
        mine, built = snapshot_view(ours), snapshot_view(theirs)
        assert mine == built, (step, differences(mine, built))
        a = run_cycle(ours, GPU_POLICY, REGISTRY)
        b = run_cycle(theirs, GPU_POLICY, REGISTRY)
        assert [(x.name, x.node, x.annotations) for x in a.binds] == [
            (x.name, x.node, x.annotations) for x in b.binds
        ], step
        assert decisions(a) == decisions(b), step
        for bind in a.binds:  # the binder writes the annotations, then binds
            old = state.pods[f"{bind.namespace}/{bind.name}"]
            meta = old.metadata.model_copy(
                update={"annotations": {**old.metadata.annotations, **bind.annotations}}
            )
            spec = old.spec.model_copy(update={"node_name": bind.node})
            status = old.status.model_copy(update={"phase": "Running"})
            state.add(old.model_copy(update={"metadata": meta, "spec": spec, "status": status}))
        for evict in a.evictions:
            state.pods.pop(f"{evict.namespace}/{evict.name}", None)
    assert any(p.spec.node_name for p in state.pods.values())


def test_a_node_cordoned_or_resized_in_place_keeps_the_model_and_its_rows() -> None:
    objs: list[Obj] = [node(f"n{i}", cpu="4", memory="8Gi") for i in range(3)]
    objs += [queue("default", weight=1)]
    # n0 and n2 keep 2.5 cpu free; n1 grows to 8 cpu (6.5 free) but is cordoned
    objs += [
        pod(f"run-{i}", cpu="500m", memory="1Gi", node_name=f"n{i % 3}", uid=f"u{i}")
        for i in range(9)
    ]
    state = state_of(objs)
    model = new_model(bare=True)
    model.snapshot(state, now=1.0, session_id="s1")
    state.add(node("n1", cpu="8", memory="8Gi", unschedulable=True, labels={"zone": "b"}))
    state.add(pod("new", cpu="2", uid="u-new"))
    ours, _ = model.snapshot(state, now=2.0, session_id="s2")
    assert model.last_build == "changes"  # no row moved: the model stands
    assert snapshot_view(ours) == snapshot_view(fresh(state, bare=True)[0])
    assert ours.nodes.idle[ours.nodes.index["n1"]][0] == 8000 - 1500  # resized, recounted
    result = run_cycle(ours, POLICIES[0], REGISTRY)
    assert [b.name for b in result.binds] == ["new"]
    assert result.binds[0].node != "n1"  # the emptiest node, but cordoned
    state.add(node("n3"))  # a new node moves rows: built from nothing
    model.snapshot(state, now=3.0, session_id="s3")
    assert model.last_build == "full"
