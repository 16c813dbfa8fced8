"""Sessions in a process of their own: only changes travel, and the results are the same."""

from __future__ import annotations

from typing import Any

import builders
from builders import node, pod, podgroup, queue, state_of
from caldera.cache.state import ClusterState
from caldera.framework.policy import default_policy
from caldera.operator.worker import SessionWorker, diff


def test_the_first_diff_is_everything_and_later_ones_only_what_changed() -> None:
    a, b = pod("a", group="pg"), pod("b", group="pg")
    state = state_of([node("n1"), podgroup("pg"), a, b])
    first = diff({}, state)
    assert first.full
    assert set(first.tables["pods"][0]) == {"default/a", "default/b"}
    sent: dict[str, dict[str, Any]] = {"pods": dict(state.pods), "nodes": dict(state.nodes)}
    resized = pod("a", group="pg", cpu="2")
    later = ClusterState(pods={"default/a": resized}, nodes=dict(state.nodes))
    changes = diff(sent, later)
    assert not changes.full
    assert changes.tables["pods"] == ({"default/a": resized}, ["default/b"])
    assert "nodes" not in changes.tables  # the same node object: nothing to send


async def test_a_worker_process_decides_as_a_thread_would_across_sessions() -> None:
    worker = SessionWorker(["volcano"], "default")
    policy = default_policy(builders.REGISTRY)
    try:
        state = state_of(
            [node("n1", cpu="2"), queue("default"), podgroup("pg"), pod("p", group="pg", cpu="1")]
        )
        result, problems = await worker.decide(state, {}, policy, "s1")
        assert [(b.name, b.node) for b in result.binds] == [("p", "n1")]
        assert problems == []
        # the pod is bound in flight, and a second one arrives: only it is sent; the worker's
        # copy plus the in-flight bind leave room for one more 1-cpu pod
        state.podgroups["default/pg2"] = podgroup("pg2")
        state.pods["default/q"] = pod("q", group="pg2", cpu="1")
        state.pods["default/r"] = pod("r", group="pg2", cpu="1")
        result, _ = await worker.decide(state, {"default/p": "n1"}, policy, "s2")
        assert [(b.name, b.node) for b in result.binds] == [("q", "n1")]
    finally:
        worker.close()
