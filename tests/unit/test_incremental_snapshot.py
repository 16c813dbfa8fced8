"""A build that reuses what the last builds derived gives the same snapshot as a fresh one.

The operator passes one :class:`BuildMemo` to every session's build: only the objects that
changed are worked out again. These tests drive the state through random change streams (pods
created, bound, finished, resized, deleted; PodGroups, queues, nodes and priority classes coming
and going; a new resource name changing the resource space) and compare, after every change, the
snapshot the kept memo gives with one built from nothing, field by field, and the decisions a
session takes on each.
"""

from __future__ import annotations

import random
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np
import pytest

from builders import (
    REGISTRY,
    node,
    owner,
    pod,
    podgroup,
    policy,
    priority_class,
    queue,
    state_of,
    workload_podgroup,
)
from caldera.api.node import NodeTable
from caldera.api.snapshot import Snapshot
from caldera.cache.snapshot import BuildMemo, build_snapshot
from caldera.cache.state import ClusterState
from caldera.framework.cycle import run_cycle
from caldera.models.core import Pod
from caldera.operator.loop.decide import KeptMemo

POLICY = policy(
    """
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""
)


def canonical(value: Any, seen: set[int] | None = None) -> Any:
    """Plain data for ``value``: dataclasses field by field, arrays as lists, Tasks and Jobs
    reached again by their key only (the job's tasks and the node table's tasks are the same
    objects)."""
    seen = set() if seen is None else seen
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.tolist())
    if isinstance(value, NodeTable):
        return {
            slot: canonical(getattr(value, slot), seen)
            for slot in NodeTable.__slots__
            if slot not in ("space", "static")  # static: caches shared between sessions
        }
    if is_dataclass(value) and not isinstance(value, type):
        if id(value) in seen:
            return ("again", type(value).__name__, getattr(value, "uid", None))
        seen.add(id(value))
        return {f.name: canonical(getattr(value, f.name), seen) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): canonical(v, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v, seen) for v in value]
    return value


def snapshot_view(snap: Snapshot) -> dict[str, Any]:
    return {
        "space": snap.space.names,
        "nodes": canonical(snap.nodes),
        "jobs": canonical(snap.jobs),
        "queues": canonical(snap.queues),
        "held": canonical(snap.held),
        "hypernodes": canonical(snap.hypernodes),
    }


class Stream:
    """Random changes to a cluster state, each a new object version as a watch delivers it."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.state: ClusterState = state_of(
            [
                *(node(f"n{i}", cpu="4", memory="8Gi") for i in range(6)),
                queue("q1", weight=2),
                priority_class("high", 100),
                podgroup("base", min_member=2),
                *(
                    pod(
                        f"r{i}",
                        group="base" if i < 3 else None,
                        cpu="500m",
                        node_name=f"n{i}",
                        phase="Running",
                    )
                    for i in range(8)
                ),
            ]
        )
        self.serial = 0

    def _name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def _pick(self, table: dict[str, Any]) -> str | None:
        return self.rng.choice(sorted(table)) if table else None

    def step(self) -> str:
        rng, state = self.rng, self.state
        what = rng.choices(
            [
                "pod",
                "bind",
                "finish",
                "resize",
                "delete",
                "group",
                "ungroup",
                "node",
                "queue",
                "priority",
                "gpu",
                "terminate",
                "controller",
                "regroup",
            ],
            weights=[8, 6, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1],
        )[0]
        if what == "pod":
            groups = sorted(k for k in state.podgroups if k != "default/base")
            group = rng.choice(groups) if groups and rng.random() < 0.6 else None
            state.add(
                pod(
                    self._name("p"),
                    group=group.partition("/")[2] if group else None,
                    cpu=rng.choice(["100m", "500m", "1", "2"]),
                    memory=rng.choice(["128Mi", "1Gi"]),
                    priority_class=rng.choice(["", "high", "missing"]),
                    annotations=(
                        {"scheduling.volcano.sh/queue-name": rng.choice(["q1", "gone"])}
                        if rng.random() < 0.2
                        else None
                    ),
                    # bare pods of one controller share a group: the first pod describes it
                    owners=(
                        [owner("ReplicaSet", rng.choice(["rs-a", "rs-b"]))]
                        if group is None and rng.random() < 0.4
                        else ()
                    ),
                    created=1_700_000_000.0 + self.serial,
                )
            )
        elif what in ("bind", "finish", "terminate", "resize", "delete"):
            key = self._pick(state.pods)
            if key is None:
                return "nothing"
            old = state.pods[key]
            if what == "delete":
                del state.pods[key]
            elif what == "bind" and not old.spec.node_name:
                target = self._pick(state.nodes) or "n0"
                spec = old.spec.model_copy(update={"node_name": target})
                status = old.status.model_copy(update={"phase": rng.choice(["Pending", "Running"])})
                state.pods[key] = old.model_copy(update={"spec": spec, "status": status})
            elif what == "finish":
                status = old.status.model_copy(
                    update={"phase": rng.choice(["Succeeded", "Failed"])}
                )
                state.pods[key] = old.model_copy(update={"status": status})
            elif what == "terminate":
                meta = old.metadata.model_copy(update={"deletion_timestamp": 1_700_000_500.0})
                state.pods[key] = old.model_copy(update={"metadata": meta})
            elif what == "resize":
                state.pods[key] = _resized(old, rng.choice(["300m", "3"]))
        elif what == "group":
            state.add(
                podgroup(
                    self._name("g"),
                    min_member=rng.choice([1, 2, 3]),
                    queue=rng.choice(["default", "q1", "gone"]),
                    priority_class=rng.choice(["", "high"]),
                    min_resources=rng.choice([None, {"cpu": "1"}]),
                    created=1_700_000_000.0 + self.serial,
                )
            )
        elif what == "ungroup":
            key = self._pick(state.podgroups)
            if key is not None:
                del state.podgroups[key]
        elif what == "node":
            name = rng.choice(["n1", "n7", "n8"])
            if name in state.nodes and rng.random() < 0.4:
                del state.nodes[name]
            else:
                state.add(
                    node(
                        name,
                        cpu=rng.choice(["2", "8"]),
                        ready=rng.random() < 0.8,
                        labels={"zone": rng.choice(["a", "b"])},
                    )
                )
        elif what == "queue":
            if "q2" in state.queues and rng.random() < 0.5:
                del state.queues["q2"]
            else:
                state.add(queue("q2", weight=rng.choice([1, 3]), capability={"cpu": "6"}))
        elif what == "regroup":  # a new version of a PodGroup: its queue or size changed
            key = self._pick(state.podgroups)
            if key is not None:
                state.add(
                    podgroup(
                        key.partition("/")[2],
                        min_member=rng.choice([1, 2]),
                        queue=rng.choice(["default", "q1", "gone"]),
                        created=1_700_000_000.0,
                    )
                )
        elif what == "controller":  # rs-a's group-min-member read (or changed); rs-b's never
            state.owner_min_members[owner("ReplicaSet", "rs-a")["uid"]] = rng.choice([1, 2])
        elif what == "priority":
            state.add(priority_class("high", rng.choice([50, 100, 1000])))
        elif what == "gpu":  # a resource name that changes the space, then goes away again
            name = "n-gpu"
            if name in state.nodes:
                del state.nodes[name]
            else:
                state.add(node(name, extra={"example.com/gpu": "4"}))
        return what


def _resized(old: Pod, cpu: str) -> Pod:
    raw = old.model_dump(by_alias=True, exclude_none=True)
    for container in raw["spec"]["containers"]:
        container.setdefault("resources", {})["requests"] = {"cpu": cpu}
    return Pod.model_validate(raw)


def build(state: ClusterState, memo: BuildMemo, *, bare: bool) -> tuple[Snapshot, list[Any]]:
    return build_snapshot(
        state,
        scheduler_names=["volcano"],
        now=1_800_000_000.0,
        session_id="s",
        memo=memo,
        bare_pods_in_memory=bare,
    )


@pytest.mark.parametrize("bare", [True, False], ids=["bare pods in memory", "PodGroups only"])
@pytest.mark.parametrize("seed", range(6))
def test_a_build_with_the_kept_memo_equals_a_fresh_build_after_every_change(
    seed: int, bare: bool
) -> None:
    stream = Stream(seed)
    kept = BuildMemo()
    reused = 0
    for step in range(60):
        what = stream.step()
        incremental, problems = build(stream.state, kept, bare=bare)
        reused += kept.kept.reused
        fresh, fresh_problems = build(stream.state, BuildMemo(), bare=bare)
        assert snapshot_view(incremental) == snapshot_view(fresh), (step, what)
        assert problems == fresh_problems, (step, what)
        # a session on each decides the same; the one on the kept build changes its objects,
        # which the next build must not carry over
        a = run_cycle(incremental, POLICY, REGISTRY)
        b = run_cycle(fresh, POLICY, REGISTRY)
        assert [(x.name, x.node) for x in a.binds] == [(x.name, x.node) for x in b.binds]
        assert [x.name for x in a.evictions] == [x.name for x in b.evictions]
        assert a.pod_conditions == b.pod_conditions and a.podgroups == b.podgroups
    assert reused > 0  # the stream did take jobs over


def test_a_job_no_session_changed_is_taken_over_and_one_a_session_changed_is_made_anew() -> None:
    state = state_of([node("n1"), podgroup("pg", min_member=1), pod("a", group="pg")])
    memo = BuildMemo()
    snap, _ = build(state, memo, bare=False)
    job = snap.jobs["default/pg"]
    task = next(iter(job.tasks.values()))
    with pytest.raises(ValueError, match="read-only"):
        task.resreq[0] = 1.0  # shared with later sessions' tasks of the same pod version
    again, _ = build(state, memo, bare=False)
    assert again.jobs["default/pg"] is job  # nothing changed: taken over
    assert memo.kept.reused == 1
    result = run_cycle(again, POLICY, REGISTRY)
    assert [b.name for b in result.binds] == ["a"]  # the session placed its task...
    third, _ = build(state, memo, bare=False)
    fresh = third.jobs["default/pg"]
    assert fresh is not job and memo.kept.reused == 0  # ...so the next build makes it anew
    assert [t.status.value for t in fresh.tasks.values()] == ["Pending"]
    assert fresh.phase == "Pending" and not fresh.conditions


def test_every_nth_session_builds_from_nothing_and_zero_means_never() -> None:
    kept = KeptMemo()
    first = kept.next(3)
    assert kept.next(3) is first
    third = kept.next(3)
    assert third is not first  # the third session starts from a fresh memo
    assert kept.next(3) is third
    never = KeptMemo()
    assert len({id(never.next(0)) for _ in range(10)}) == 1


def test_a_kubernetes_podgroups_job_is_taken_over_while_nothing_changed() -> None:
    members = [pod(f"m{i}", scheduling_group="wg") for i in range(2)]
    state = state_of([node("n1"), workload_podgroup("wg", min_count=2), *members])
    memo = BuildMemo()
    first, _ = build(state, memo, bare=False)
    (key,) = [k for k in first.jobs if "podgroups.scheduling.k8s.io" in k]
    again, _ = build(state, memo, bare=False)
    assert again.jobs[key] is first.jobs[key]  # nothing changed: taken over, as a Volcano one
    state.add(workload_podgroup("wg", min_count=1))  # a new object of it: made anew
    third, _ = build(state, memo, bare=False)
    assert third.jobs[key] is not first.jobs[key] and third.jobs[key].min_available == 1
