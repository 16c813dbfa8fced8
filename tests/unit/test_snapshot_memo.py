"""The pod memo: requests computed once per pod version across sessions, never stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import node, pod, podgroup, state_of
from caldera.cache import memo as memo_module
from caldera.cache.snapshot import BuildMemo, build_snapshot
from caldera.framework.policy import default_policy
from caldera.framework.registry import Registry
from caldera.models.core import Pod, PodSpec, effective_requests
from caldera.simulate.manifests import load_manifests
from caldera.simulate.runner import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def snapshot_cpu(state_pods: dict[str, Pod], memo: BuildMemo) -> dict[str, float]:
    state = state_of([node("n1"), podgroup("pg", min_member=1)])
    state.pods.update(state_pods)
    snap, _ = build_snapshot(state, scheduler_names=["volcano"], now=1.0, session_id="s", memo=memo)
    cpu = snap.space.index["cpu"]
    return {t.name: float(t.resreq[cpu]) for t in snap.jobs["default/pg"].tasks.values()}


def test_a_pod_version_is_computed_once_and_a_new_version_is_recomputed() -> None:
    memo = BuildMemo()
    first = pod("a", group="pg", cpu="1")
    assert snapshot_cpu({"default/a": first}, memo) == {"a": 1000.0}
    facts = memo.entry("default/a", first).facts
    assert memo.entry("default/a", first).facts is facts  # the same object: remembered
    # the watch delivers a new object for the same pod: its requests are read again
    resized = pod("a", group="pg", cpu="3")
    assert snapshot_cpu({"default/a": resized}, memo) == {"a": 3000.0}
    assert memo.entry("default/a", resized).facts is not facts


def test_pods_gone_from_the_state_are_forgotten() -> None:
    memo = BuildMemo()
    a, b = pod("a", group="pg"), pod("b", group="pg")
    snapshot_cpu({"default/a": a, "default/b": b}, memo)
    kept = memo.entry("default/a", a).facts
    snapshot_cpu({"default/a": a}, memo)
    assert memo.entry("default/a", a).facts is kept
    assert "default/b" not in memo._entries


def test_a_simulation_works_out_each_pod_object_once_over_its_cycles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    computed: list[str] = []
    real = effective_requests

    def counted(spec: PodSpec) -> dict[str, float]:
        computed.append(spec.containers[0].name)
        return real(spec)

    monkeypatch.setattr(memo_module, "effective_requests", counted)
    loaded = load_manifests([str(EXAMPLES)])
    pods = len(loaded.state.pods)
    registry = Registry.from_entry_points()
    sim = simulate(
        loaded.state, default_policy(registry), registry, scheduler_names=["volcano"], cycles=3
    )
    bound = sum(len(rec.result.binds) for rec in sim.cycles)
    assert bound > 0
    # every pod once, and a bound pod once more: binding replaces its object
    assert len(computed) == pods + bound
