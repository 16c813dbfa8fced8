"""A build that reuses what the last builds derived gives the same snapshot as a fresh one.

The operator passes one :class:`BuildMemo` to every session's build: only the objects that
changed are worked out again. These tests drive the state through random change streams (pods
created, bound, finished, resized, deleted; PodGroups, queues, nodes and priority classes coming
and going; a new resource name changing the resource space) and compare, after every change, the
snapshot the kept memo gives with one built from nothing, field by field, and the decisions a
session takes on each.
"""

from __future__ import annotations

from typing import Any

import pytest

from builders import (
    REGISTRY,
    node,
    pod,
    podgroup,
    policy,
    state_of,
    workload_podgroup,
)
from caldera.api.snapshot import Snapshot
from caldera.cache.snapshot import BuildMemo, build_snapshot
from caldera.cache.state import ClusterState
from caldera.framework.cycle import run_cycle
from changes import Stream, snapshot_view

POLICY = policy(
    """
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""
)


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
