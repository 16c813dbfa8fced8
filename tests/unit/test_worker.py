"""Sessions in a process of their own: only changes travel, and the results are the same."""

from __future__ import annotations

import builders
from builders import node, pod, podgroup, queue, state_of
from caldera.cache.state import Changes
from caldera.framework.policy import default_policy
from caldera.operator.loop.worker import SessionConfig, SessionWorker


async def test_a_worker_process_decides_as_a_thread_would_across_sessions() -> None:
    worker = SessionWorker(SessionConfig(["volcano"], "default", bare_pods_in_memory=True))
    policy = default_policy(builders.REGISTRY)
    try:
        state = state_of(
            [node("n1", cpu="2"), queue("default"), podgroup("pg"), pod("p", group="pg", cpu="1")]
        )
        # a new worker is sent everything, whatever changes it is given
        result, problems = await worker.decide(state, Changes(), {}, policy, "s1")
        assert [(b.name, b.node) for b in result.binds] == [("p", "n1")]
        assert problems == []
        # the pod is bound in flight, and two more arrive: only they are sent; the worker's
        # copy plus the in-flight bind leave room for one more 1-cpu pod
        q, r = pod("q", group="pg2", cpu="1"), pod("r", group="pg2", cpu="1")
        changes = Changes(
            {
                "podgroups": ({"default/pg2": podgroup("pg2")}, []),
                "pods": ({"default/q": q, "default/r": r}, []),
            }
        )
        result, _ = await worker.decide(state, changes, {"default/p": "n1"}, policy, "s2")
        assert [(b.name, b.node) for b in result.binds] == [("q", "n1")]
        # a bare pod (no PodGroup) is grouped in memory and placed once room is freed
        bare = pod("bare", cpu="1")
        changes = Changes({"pods": ({"default/bare": bare}, ["default/q", "default/r"])})
        result, problems = await worker.decide(state, changes, {"default/p": "n1"}, policy, "s3")
        assert [(b.name, b.node) for b in result.binds] == [("bare", "n1")]
        assert problems == []
    finally:
        worker.close()
