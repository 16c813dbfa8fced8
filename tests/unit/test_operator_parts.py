"""Operator parts that need no API server: retry queue, assumptions, policy reload, endpoints."""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

import builders
from caldera.cache.builder import preempted
from caldera.framework.policy import DEFAULT_POLICY_YAML
from caldera.k8s.endpoints import parse_address, serve_health, serve_metrics
from caldera.operator.metrics import Metrics, exponential_range
from caldera.operator.watch.assume import Assumptions, changed_pods, overlaid
from caldera.operator.watch.policy import PolicyHolder
from caldera.operator.writers.retry import RetryPolicy, TokenBucket, WorkQueue

FAST = RetryPolicy(base=0.001, cap=0.01, qps=1000.0, burst=1000)


async def _drain(queue: WorkQueue[str, int]) -> None:
    runner = asyncio.create_task(queue.run())
    try:
        await asyncio.wait_for(queue.join(), timeout=5)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_items_are_handled_and_failures_retried_until_done() -> None:
    attempts: dict[str, int] = {}

    async def handle(key: str, value: int) -> bool:
        attempts[key] = attempts.get(key, 0) + 1
        return attempts[key] >= value  # succeed on the value-th attempt

    queue: WorkQueue[str, int] = WorkQueue("t", handle, workers=4, policy=FAST)
    for key, tries in (("a", 1), ("b", 3), ("c", 5)):
        queue.put(key, tries)
    await _drain(queue)
    assert attempts == {"a": 1, "b": 3, "c": 5}
    assert queue.failures("c") == 0  # cleared on success
    assert queue.retrying == 0


async def test_a_key_in_its_retry_backoff_counts_as_retrying_not_as_new_work() -> None:
    async def fail(key: str, value: int) -> bool:
        return False

    slow = RetryPolicy(base=60.0, cap=60.0)
    queue: WorkQueue[str, int] = WorkQueue("t", fail, workers=1, policy=slow)
    runner = asyncio.create_task(queue.run())
    try:
        queue.put("stuck", 1)
        for _ in range(100):
            if queue.retrying:
                break
            await asyncio.sleep(0.01)
        assert (len(queue), queue.retrying) == (1, 1)  # waiting out its backoff: no new work
    finally:
        runner.cancel()


async def test_an_exception_counts_as_a_failure_and_is_retried() -> None:
    calls = 0

    async def handle(key: str, value: int) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return True

    queue: WorkQueue[str, int] = WorkQueue("t", handle, workers=1, policy=FAST)
    queue.put("a", 1)
    await _drain(queue)
    assert calls == 2


async def test_a_newer_value_replaces_one_still_waiting() -> None:
    seen: list[int] = []

    async def handle(key: str, value: int) -> bool:
        seen.append(value)
        return True

    queue: WorkQueue[str, int] = WorkQueue("t", handle, workers=1, policy=FAST)
    queue.put("a", 1)
    queue.put("a", 2)
    await _drain(queue)
    assert seen == [2]


async def test_one_key_is_never_handled_by_two_workers_at_once() -> None:
    running: set[str] = set()
    overlaps = 0

    async def handle(key: str, value: int) -> bool:
        nonlocal overlaps
        if key in running:
            overlaps += 1
        running.add(key)
        await asyncio.sleep(0.005)
        running.discard(key)
        return True

    queue: WorkQueue[str, int] = WorkQueue("t", handle, workers=8, policy=FAST)
    runner = asyncio.create_task(queue.run())
    for i in range(20):
        queue.put("same", i)
        await asyncio.sleep(0.001)
    await asyncio.wait_for(queue.join(), timeout=5)
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    assert overlaps == 0


def test_backoff_doubles_from_the_base_and_stops_at_the_cap() -> None:
    policy = RetryPolicy()
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [0.005, 0.01, 0.02, 0.04]
    assert policy.delay(40) == 1000.0


async def test_token_bucket_spends_its_burst_then_waits_for_refill() -> None:
    loop = asyncio.get_running_loop()
    bucket = TokenBucket(rate=100.0, burst=3)
    start = loop.time()
    for _ in range(3):
        await bucket.take()
    burst_time = loop.time() - start
    await bucket.take()  # needs one refill: about 10 ms
    assert burst_time < loop.time() - start


def test_a_sessions_overlay_is_made_in_its_own_pods_and_undone_after_it() -> None:
    pending, victim, other = builders.pod("p"), builders.pod("v", node_name="n2"), builders.pod("o")
    pods = {"default/p": pending, "default/v": victim, "default/o": other}
    changes = changed_pods(pods, {"default/p": ("n1", {"a": "1"})}, ["default/v"], now=5.0)
    with overlaid(pods, changes) as view:
        assert view is pods  # no copy of every pod
        assert view["default/p"].spec.node_name == "n1"
        assert view["default/p"].metadata.annotations == {"a": "1"}
        assert view["default/v"].metadata.deletion_timestamp == 5.0
        assert preempted(view["default/v"])  # as the evictor's condition will say
        assert view["default/o"] is other
    assert pods == {"default/p": pending, "default/v": victim, "default/o": other}
    assert all(pods[k] is v for k, v in (("default/p", pending), ("default/v", victim)))


def test_assumed_binds_are_applied_until_the_watch_confirms_them() -> None:
    pending = builders.pod("p")
    assumed = Assumptions()
    assumed.assume("default/p", "n1")
    view = assumed.overlay({"default/p": pending})
    assert view["default/p"].spec.node_name == "n1"
    assert "default/p" in assumed
    bound = builders.pod("p", node_name="n1")
    assert assumed.overlay({"default/p": bound})["default/p"].spec.node_name == "n1"
    assert "default/p" not in assumed  # confirmed by the watch: dropped


def test_an_assumed_bind_carries_the_device_annotations_the_binder_writes() -> None:
    # until the watch shows the pod bound, a session must count the cards it was given
    assumed = Assumptions()
    cards = {"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1000,0:;"}
    assumed.assume("default/p", "n1", "", cards)
    pending = builders.pod("p", annotations={"team": "a"})
    view = assumed.overlay({"default/p": pending})["default/p"]
    assert view.spec.node_name == "n1"
    assert view.metadata.annotations == {"team": "a", **cards}
    assert pending.metadata.annotations == {"team": "a"}  # the cache's pod is not changed


def test_assumptions_for_deleted_or_replaced_pods_are_dropped_and_no_clock_ends_one() -> None:
    assumed = Assumptions()
    original = builders.pod("p", uid="first")
    assumed.assume("default/gone", "n1", "uid-gone")
    assumed.assume("default/p", "n1", original.metadata.uid)
    assumed.assume("default/lagging", "n2", "")
    lagging = builders.pod("lagging")
    replaced = original.model_copy(
        update={"metadata": original.metadata.model_copy(update={"uid": "a-new-pod"})}
    )
    view = assumed.overlay({"default/p": replaced, "default/lagging": lagging})
    assert view["default/p"].spec.node_name == ""  # a new pod of the same name is not ours
    assert "default/gone" not in assumed and "default/p" not in assumed
    # however long the watch takes to confirm it, a bind in flight stays assumed
    for _ in range(3):
        view = assumed.overlay({"default/lagging": lagging})
        assert view["default/lagging"].spec.node_name == "n2"
    assert len(assumed) == 1


def test_policy_reload_keeps_the_old_policy_when_the_new_file_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(DEFAULT_POLICY_YAML)
    holder = PolicyHolder(str(path), builders.REGISTRY)
    assert [a.name for a in holder.policy.actions] == ["enqueue", "allocate", "backfill"]
    assert holder.check() is None  # unchanged

    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    assert holder.check() is None
    assert [a.name for a in holder.policy.actions] == ["allocate"]

    path.write_text('actions: "allocate, shufle"\ntiers:\n- plugins:\n  - name: gang\n')
    error = holder.check()
    assert error is not None and error.key == "actions"
    assert [a.name for a in holder.policy.actions] == ["allocate"]  # the old one stays


def test_a_reloaded_policy_naming_another_device_configmap_says_it_waits_for_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The informers are made when the scheduler starts: an object a reloaded policy reads by
    name for the first time is not watched yet, and the log says so."""
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments:\n'
    vnpu = "      deviceshare.AscendHAMiVNPUEnable: true\n"
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(conf + vnpu)
    holder = PolicyHolder(str(path), builders.REGISTRY)
    assert holder.policy.read_objects == {("ConfigMap", "kube-system/volcano-vgpu-device-config")}
    path.write_text(conf + vnpu + "      deviceshare.KnownGeometriesCMName: devices\n")
    with caplog.at_level(logging.WARNING):
        assert holder.check() is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "policy: ConfigMap kube-system/devices not watched until the scheduler restarts"
    ]


def test_a_reloaded_policy_logs_each_place_nothing_reads_and_strict_keeps_the_old_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    lenient = PolicyHolder(str(path), builders.REGISTRY)
    strict = PolicyHolder(str(path), builders.REGISTRY, strict=True)
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: gnag\n')
    with caplog.at_level(logging.WARNING):
        assert lenient.check() is None
    assert lenient.policy.layout == [["gang"]]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        (
            f"policy: {path}: tiers[0].plugins[1].name: unknown plugin 'gnag' (did you mean "
            "'gang'?): neither built in nor installed as an entry point; the other plugins run "
            "without it"
        )
    ]
    error = strict.check()
    assert error is not None and error.key == "tiers[0].plugins[1].name"
    assert strict.policy.warnings == ()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        pytest.param(":8080", (None, 8080), id="Go style: all interfaces"),
        pytest.param("127.0.0.1:11251", ("127.0.0.1", 11251), id="host and port"),
    ],
)
def test_addresses_are_read_go_style(address: str, expected: tuple[str | None, int]) -> None:
    assert parse_address(address) == expected


async def test_readiness_follows_the_cache_and_metrics_use_volcano_names() -> None:
    ready = asyncio.Event()
    metrics = Metrics(CollectorRegistry())
    metrics.e2e.observe(12.0)
    health = await serve_health("127.0.0.1:0", ready)
    served = await serve_metrics("127.0.0.1:0", metrics.registry)
    try:
        hport = health.addresses[0][1]
        mport = served.addresses[0][1]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{hport}/healthz") as r:
                assert r.status == 200
            async with http.get(f"http://127.0.0.1:{hport}/readyz") as r:
                assert r.status == 503
            ready.set()
            async with http.get(f"http://127.0.0.1:{hport}/readyz") as r:
                assert r.status == 200
            async with http.get(f"http://127.0.0.1:{mport}/metrics") as r:
                text = await r.text()
        assert "volcano_e2e_scheduling_latency_milliseconds_count 1.0" in text
        for name in (
            "volcano_action_scheduling_latency_milliseconds",
            "volcano_unschedule_job_count",
            "volcano_queue_allocated_milli_cpu",
        ):
            assert name in text
    finally:
        await health.cleanup()
        await served.cleanup()


def test_buckets_match_gos_exponential_range() -> None:
    buckets = exponential_range(1, 5000, 20)
    assert len(buckets) == 20
    assert buckets[0] == 1 and abs(buckets[-1] - 5000) < 1e-6
    ratios = {round(b / a, 9) for a, b in itertools.pairwise(buckets)}
    assert len(ratios) == 1


def test_json_logs_carry_the_object_a_line_is_about() -> None:
    import json
    import logging

    from kopf._core.actions.loggers import make_formatter

    from caldera.operator.logs import FORMATS, about

    formatter = make_formatter(log_format=FORMATS["json"], log_prefix=False, log_refkey="object")
    record = logging.LogRecord(
        "caldera.operator.binder",
        logging.WARNING,
        __file__,
        1,
        "bind %s to %s failed: %s",
        ("default/p", "n1", "HTTP 500"),
        None,
    )
    for key, value in about("Pod", "p", "default").items():
        setattr(record, key, value)
    line = json.loads(formatter.format(record))
    assert line["message"] == "bind default/p to n1 failed: HTTP 500"
    assert line["object"] == {"kind": "Pod", "name": "p", "namespace": "default"}
    assert line["severity"] == "warn"
    assert "timestamp" in line


def test_counts_set_after_a_session_replace_those_of_the_one_before() -> None:
    metrics = Metrics(CollectorRegistry())
    gauge = metrics.pending_podgroups
    metrics.set_counts(gauge, {("Inqueue", "NotEnoughResources"): 2, ("Pending", ""): 1})
    metrics.set_counts(gauge, {("Pending", ""): 3})
    read = metrics.registry.get_sample_value
    assert read("caldera_pending_podgroups", {"phase": "Pending", "reason": ""}) == 3
    assert (
        read("caldera_pending_podgroups", {"phase": "Inqueue", "reason": "NotEnoughResources"})
        is None
    )
