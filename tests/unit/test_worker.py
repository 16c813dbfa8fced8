"""Sessions in a process of their own: only changes travel (as JSON), results are the same."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import stat
import subprocess
import sys
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

import builders
from caldera.cache.state import copy_state
from caldera.framework.policy import default_policy
from caldera.models.kinds import KINDS
from caldera.operator.loop.decide import can_fork, decide, new_model
from caldera.operator.loop.worker import SessionConfig, SessionWorker
from caldera.operator.watch.cache import Cache
from integration.harness import node, pod, podgroup, queue


def _with_uid(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["uid"] = f"uid-{obj['metadata']['name']}"
    return obj


def _add(cache: Cache, kind: str, obj: dict[str, Any]) -> None:
    cache.apply(KINDS[kind], "ADDED", _with_uid(obj))


def _worker_and_cache(fork: bool) -> tuple[SessionWorker, Cache]:
    """A session process (forked or spawned) and a cache with one 2-cpu node and the queue."""
    worker = SessionWorker(
        SessionConfig(["volcano"], "default", bare_pods_in_memory=True), fork=fork
    )
    cache = Cache(["volcano"])
    _add(cache, "Node", node("n1", cpu="2"))
    _add(cache, "Queue", queue("default"))
    return worker, cache


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
async def test_a_worker_process_decides_as_a_thread_would_across_sessions(fork: bool) -> None:
    # forked: it starts from the cache's state in memory; spawned: it is sent everything
    worker, cache = _worker_and_cache(fork)
    policy = default_policy(builders.REGISTRY)
    _add(cache, "PodGroup", podgroup("pg", 1))
    _add(cache, "Pod", pod("p", group="pg", cpu="1"))
    try:
        result, problems = await worker.decide(cache, {}, policy, "s1")
        assert [(b.name, b.node) for b in result.binds] == [("p", "n1")]
        assert problems == []
        # the pod is bound in flight, and two more arrive: only they are sent; the worker's
        # copy plus the in-flight bind leave room for one more 1-cpu pod
        _add(cache, "PodGroup", podgroup("pg2", 1))
        _add(cache, "Pod", pod("q", group="pg2", cpu="1"))
        _add(cache, "Pod", pod("r", group="pg2", cpu="1"))
        result, _ = await worker.decide(cache, {"default/p": ("n1", {})}, policy, "s2")
        assert [(b.name, b.node) for b in result.binds] == [("q", "n1")]
        for name in ("q", "r"):
            _add(cache, "Pod", pod(name, group="pg2", cpu="1"))  # the same again: no change
        assert len(cache.take_changes()) == 0  # nothing to send
        # a bare pod (no PodGroup) is grouped in memory and placed once room is freed
        for name in ("q", "r"):
            cache.apply(KINDS["Pod"], "DELETED", _with_uid(pod(name, group="pg2")))
        _add(cache, "Pod", pod("bare", cpu="1"))
        result, problems = await worker.decide(cache, {"default/p": ("n1", {})}, policy, "s3")
        assert [(b.name, b.node) for b in result.binds] == [("bare", "n1")]
        assert problems == []
    finally:
        worker.close()


async def test_a_large_sessions_binds_are_sent_ahead_of_its_result() -> None:
    streamed: list[tuple[str, list[str]]] = []
    worker = SessionWorker(
        SessionConfig(["volcano"], "default", bare_pods_in_memory=True),
        on_binds=lambda item: streamed.append((item[0], [b.name for b in item[1]])),
    )
    cache = Cache(["volcano"])
    _add(cache, "Queue", queue("default"))
    for i in range(4):
        _add(cache, "Node", node(f"n{i}", cpu="64", memory="256Gi"))
    for i in range(200):
        _add(cache, "Pod", pod(f"p{i:03}", cpu="100m"))
    try:
        result, _ = await worker.decide(cache, {}, default_policy(builders.REGISTRY), "the-session")
        await asyncio.sleep(0.2)  # the reader thread hands batches to the loop
    finally:
        worker.close()
    assert len(result.binds) == 200
    ahead = [name for session, names in streamed for name in names]
    assert {session for session, _ in streamed} == {"the-session"}
    # every batch (64 binds, or what 20 ms gathered) went out before the session ended; only
    # what came after the last batch comes with the result alone
    assert len(ahead) >= 200 - 63 and set(ahead) <= {b.name for b in result.binds}


def test_the_session_process_imports_no_operator_io() -> None:
    # what a spawned session process imports: the engine, not kopf or the Kubernetes client
    # (half its start-up time and tens of MiB)
    code = (
        "import sys; import caldera.operator.loop.decide as d; d.start(None); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'kopf', 'kubernetes_asyncio', 'aiohttp', 'prometheus_client'}))"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "operator")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_session_process_ends_when_the_operator_is_killed_outright() -> None:
    # SIGKILL leaves no chance to stop the worker; it must notice and end by itself rather than
    # hold the cluster's state in memory for nobody
    code = (
        "import multiprocessing, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "import caldera.operator.loop.decide as d\n"
        "if __name__ == '__main__':\n"
        "    ctx = multiprocessing.get_context('spawn')\n"
        "    pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=d.start, initargs=(None,))\n"
        "    print(pool.submit(__import__('os').getpid).result(), flush=True)\n"
        "    time.sleep(600)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "operator")}
    with subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        os.kill(worker, 0)  # alive while the operator is
        parent.kill()
        parent.wait()
    for _ in range(300):  # it looks once a second; allow a slow machine plenty
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        __import__("time").sleep(0.1)
    os.kill(worker, 9)
    raise AssertionError("the session process outlived its operator")


def _open_sockets() -> int:
    return sum(
        stat.S_ISSOCK(os.fstat(int(fd)).st_mode)
        for fd in os.listdir("/proc/self/fd")
        if os.path.exists(f"/proc/self/fd/{fd}")
    )


@pytest.mark.skipif(not can_fork(), reason="the session process is spawned here")
async def test_a_forked_session_process_keeps_none_of_the_operators_sockets() -> None:
    # a copy of an API connection left open in the child would hold it open after the
    # operator closed it
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    worker = SessionWorker(SessionConfig(["volcano"], "default", bare_pods_in_memory=True))
    cache = Cache(["volcano"])
    _add(cache, "Node", node("n1", cpu="2"))
    _add(cache, "Queue", queue("default"))
    try:
        assert worker.fork
        await worker.warm(cache)
        assert _open_sockets() >= 1  # here, the listener
        pool = worker._pool
        assert pool is not None
        assert pool.submit(_open_sockets).result() == 0
        # and it has the cache's state without being sent it
        _add(cache, "Pod", pod("p", cpu="1"))
        result, _ = await worker.decide(cache, {}, default_policy(builders.REGISTRY), "s1")
        assert [(b.name, b.node) for b in result.binds] == [("p", "n1")]
    finally:
        worker.close()
        listener.close()


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
async def test_a_session_process_that_died_is_replaced_with_the_state_as_it_is_now(
    fork: bool,
) -> None:
    if fork and not can_fork():
        pytest.skip("the session process is spawned here")
    worker, cache = _worker_and_cache(fork)
    policy = default_policy(builders.REGISTRY)
    _add(cache, "Pod", pod("a", cpu="1"))
    try:
        result, _ = await worker.decide(cache, {}, policy, "s1")
        assert [b.name for b in result.binds] == ["a"]
        pool = worker._pool
        assert pool is not None
        for process in list(pool._processes.values()):
            process.kill()
            process.join()
        _add(cache, "Pod", pod("b", cpu="1"))  # news the dead process never heard of
        with pytest.raises(BrokenProcessPool):
            await worker.decide(cache, {"default/a": ("n1", {})}, policy, "s2")
        # the next session has a new process with everything, b included; a still holds its cpu
        _add(cache, "Pod", pod("c", cpu="1"))
        result, _ = await worker.decide(cache, {"default/a": ("n1", {})}, policy, "s3")
        assert [b.name for b in result.binds] == ["b"]
    finally:
        worker.close()


def test_a_session_leaves_no_garbage_for_the_collector_once_it_returns() -> None:
    # its plugins' handlers and closures are cyclic, and hold arrays as long as the node list:
    # collected as the session returns, not whenever the oldest generation is next collected
    cache = Cache(["volcano"])
    for i in range(3):
        _add(cache, "Node", node(f"n{i}", cpu="2"))
    _add(cache, "Queue", queue("default"))
    _add(cache, "Pod", pod("p", cpu="1"))
    config = SessionConfig(["volcano"], "default", bare_pods_in_memory=True)
    policy = default_policy(builders.REGISTRY)
    model = new_model(config)
    state = copy_state(cache.state)
    decide(state, {}, policy, builders.REGISTRY, config, session_id="s0", model=model)
    gc.collect()
    result, _ = decide(state, {}, policy, builders.REGISTRY, config, session_id="s1", model=model)
    assert [b.name for b in result.binds] == ["p"]  # a session that placed a pod
    assert gc.collect() == 0
