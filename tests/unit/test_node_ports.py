"""NodePorts, PrePredicate's Skip mechanism and the stable-filter cache (predicate.CacheEnable).

Host ports are listed as kube's ``GetHostPorts`` lists them: regular containers and sidecars
(init containers with ``restartPolicy: Always``), never plain init containers. Host-port conflicts
follow kube-scheduler's HostPortInfo rules: an empty host IP means 0.0.0.0,
which conflicts with the same protocol and port on any IP; a specific IP conflicts with itself and
with 0.0.0.0; protocols never conflict with each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from builders import Obj, binds, node, open_session, pod, podgroup, policy_text, scenario
from caldera.framework.session import Session
from caldera.plugins.predicates import PredicatesPlugin
from caldera.plugins.predicates.ports import REASON

POLICY = policy_text("enqueue, allocate", ["gang", "predicates"])


def hp(port: int, ip: str = "", protocol: str = "TCP") -> dict[str, Any]:
    out: dict[str, Any] = {"containerPort": 8000 + port % 1000, "hostPort": port}
    if ip:
        out["hostIP"] = ip
    if protocol != "TCP":
        out["protocol"] = protocol
    return out


def session(
    existing: list[Mapping[str, Any]], wanted: list[Mapping[str, Any]], policy: str = POLICY
) -> Session:
    objects: list[Obj] = [node("n1"), node("n2"), podgroup("pg")]
    if existing:
        objects.append(pod("old", node_name="n1", ports=existing, scheduler="other"))
    objects.append(pod("new", group="pg", ports=wanted))
    return open_session(objects, policy)


def rejected(ssn: Session) -> list[str]:
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    assert ssn.pre_predicate(task) is None
    out: list[str] = []
    for reason, mask in ssn.predicate(task):
        assert reason == REASON
        out += [ssn.nodes.names[i] for i in np.flatnonzero(mask)]
    return sorted(out)


@pytest.mark.parametrize(
    ("existing", "wanted", "expected"),
    [
        pytest.param([hp(80)], [hp(80)], ["n1"], id="same port, both on 0.0.0.0: conflict"),
        pytest.param([hp(80)], [hp(81)], [], id="different port: no conflict"),
        pytest.param(
            [hp(80, protocol="UDP")], [hp(80)], [], id="same port, other protocol: no conflict"
        ),
        pytest.param(
            [hp(80, ip="10.0.0.1")],
            [hp(80, ip="10.0.0.2")],
            [],
            id="same port on two specific IPs: no conflict",
        ),
        pytest.param(
            [hp(80, ip="10.0.0.1")],
            [hp(80, ip="10.0.0.1")],
            ["n1"],
            id="same port on the same IP: conflict",
        ),
        pytest.param(
            [hp(80, ip="10.0.0.1")], [hp(80)], ["n1"], id="wanted 0.0.0.0 vs used specific IP"
        ),
        pytest.param(
            [hp(80)], [hp(80, ip="10.0.0.1")], ["n1"], id="wanted specific IP vs used 0.0.0.0"
        ),
        pytest.param(
            [hp(80, ip="0.0.0.0")], [hp(80)], ["n1"], id="explicit 0.0.0.0 equals an empty IP"
        ),
        pytest.param(
            [{"containerPort": 80}], [hp(80)], [], id="a container port without hostPort is free"
        ),
        pytest.param([hp(80), hp(443)], [hp(443)], ["n1"], id="any one conflicting port rejects"),
    ],
)
def test_host_port_conflicts(
    existing: list[Mapping[str, Any]], wanted: list[Mapping[str, Any]], expected: list[str]
) -> None:
    assert rejected(session(existing, wanted)) == expected


def init(port: int, *, sidecar: bool) -> dict[str, Any]:
    """An init container holding host port ``port``; a sidecar restarts Always."""
    out: dict[str, Any] = {"name": f"init-{port}", "image": "busybox", "ports": [hp(port)]}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def placed_and_wanted(
    held: dict[str, Any], wanted: dict[str, Any], policy: str = POLICY
) -> list[str]:
    """The nodes NodePorts rejects for a new pod when a pod on n1 holds ports: ``held`` and
    ``wanted`` are the pods' builder arguments (``ports`` or ``init_containers``)."""
    objects: list[Obj] = [
        node("n1"),
        node("n2"),
        podgroup("pg"),
        pod("old", node_name="n1", scheduler="other", **held),
        pod("new", group="pg", **wanted),
    ]
    return rejected(open_session(objects, policy))


@pytest.mark.parametrize(
    ("held", "wanted", "expected"),
    [
        pytest.param(
            {"init_containers": [init(8080, sidecar=True)]},
            {"init_containers": [init(8080, sidecar=True)]},
            ["n1"],
            id="a sidecar's port against a placed pod's sidecar",
        ),
        pytest.param(
            {"ports": [hp(8080)]},
            {"init_containers": [init(8080, sidecar=True)]},
            ["n1"],
            id="a sidecar's port against a placed pod's main container",
        ),
        pytest.param(
            {"init_containers": [init(8080, sidecar=True)]},
            {"ports": [hp(8080)]},
            ["n1"],
            id="a main container's port against a placed pod's sidecar",
        ),
        pytest.param(
            {"init_containers": [init(8080, sidecar=False)]},
            {"ports": [hp(8080)]},
            [],
            id="a placed pod's plain init container holds no port",
        ),
        pytest.param(
            {"ports": [hp(8080)]},
            {"init_containers": [init(8080, sidecar=False)]},
            [],
            id="a plain init container wants no port",
        ),
    ],
)
def test_sidecar_host_ports_count_as_kube_gethostports_lists_them(
    held: dict[str, Any], wanted: dict[str, Any], expected: list[str]
) -> None:
    assert placed_and_wanted(held, wanted) == expected


def test_a_pod_whose_sidecar_wants_a_held_port_goes_to_the_other_node() -> None:
    sim = scenario(
        [
            node("n1"),
            node("n2"),
            pod(
                "old", node_name="n1", scheduler="other", init_containers=[init(8080, sidecar=True)]
            ),
            podgroup("pg"),
            pod("p", group="pg", init_containers=[init(8080, sidecar=True)]),
        ],
        policy_yaml=POLICY,
    )
    assert binds(sim) == {"default/p": "n2"}


def test_a_sidecar_port_taken_within_the_session_is_seen_by_the_next_pod() -> None:
    sim = scenario(
        [
            node("n1"),
            podgroup("a"),
            podgroup("b"),
            pod("a", group="a", init_containers=[init(8080, sidecar=True)]),
            pod("b", group="b", ports=[hp(8080)]),
        ],
        policy_yaml=POLICY,
    )
    assert len(binds(sim)) == 1


def test_a_pod_without_host_ports_skips_the_filter() -> None:
    ssn = session([hp(80)], [])
    plugin = next(p for p in ssn.plugins if isinstance(p, PredicatesPlugin))
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    assert ssn.pre_predicate(task) is None
    assert "NodePorts" in plugin._skipped[task.uid]
    assert ssn.predicate(task) == []


def test_node_ports_off_lets_the_conflict_through() -> None:
    off = policy_text(
        "enqueue, allocate",
        ["gang", "predicates"],
        arguments={"predicates": {"predicate.NodePortsEnable": False}},
    )
    assert rejected(session([hp(80)], [hp(80)], off)) == []


def test_ports_taken_within_the_session_are_seen_by_the_next_pod() -> None:
    sim = scenario(
        [
            node("n1"),
            node("n2"),
            podgroup("a"),
            podgroup("b"),
            podgroup("c"),
            pod("a", group="a", ports=[hp(80)]),
            pod("b", group="b", ports=[hp(80)]),
            pod("c", group="c", ports=[hp(80)]),
        ],
        policy_yaml=POLICY,
    )
    placed = binds(sim)
    assert sorted(placed) == ["default/a", "default/b"]
    assert sorted(placed.values()) == ["n1", "n2"]


def test_simulate_sees_ports_freed_by_victims_and_taken_by_new_pods() -> None:
    ssn = session([hp(80)], [hp(80)])
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    n1 = ssn.nodes.index["n1"]
    victim = next(iter(ssn.nodes.tasks[n1].values()))
    assert ssn.simulate_predicate(task, n1) == [REASON]
    assert ssn.simulate_predicate(task, n1, removed=[victim]) == []
    n2 = ssn.nodes.index["n2"]
    assert ssn.simulate_predicate(task, n2) == []
    assert ssn.simulate_predicate(task, n2, added=[victim]) == [REASON]
    # nothing was changed by simulating
    assert rejected(ssn) == ["n1"]


# -- the stable-filter cache ------------------------------------------------------------------

TEMPLATE = {"volcano.sh/template-uid": "job-worker"}


def cache_session(enabled: bool) -> tuple[Session, PredicatesPlugin]:
    pol = policy_text(
        "enqueue, allocate",
        ["gang", "predicates"],
        arguments={"predicates": {"predicate.CacheEnable": enabled}},
    )
    objects: list[Obj] = [
        node("gpu", labels={"gpu": "true"}),
        node("cpu"),
        podgroup("pg", min_member=2),
        pod("w0", group="pg", annotations=TEMPLATE, node_selector={"gpu": "true"}),
        pod("w1", group="pg", annotations=TEMPLATE, node_selector={"gpu": "true"}),
    ]
    ssn = open_session(objects, pol)
    return ssn, next(p for p in ssn.plugins if isinstance(p, PredicatesPlugin))


@pytest.mark.parametrize("enabled", [True, False], ids=["cache on", "cache off"])
def test_pods_of_one_template_get_the_same_stable_verdict(enabled: bool) -> None:
    ssn, plugin = cache_session(enabled)
    w0, w1 = ssn.jobs["default/pg"].tasks.values()
    first = ssn.predicate(w0)
    second = ssn.predicate(w1)
    assert [(r, list(m)) for r, m in first] == [(r, list(m)) for r, m in second]
    assert [ssn.nodes.names[i] for i in np.flatnonzero(first[0][1])] == ["cpu"]
    assert (len(plugin._template_cache) == 1) is enabled


def test_the_template_cache_answers_without_running_the_stable_filters() -> None:
    ssn, plugin = cache_session(True)
    w0, w1 = ssn.jobs["default/pg"].tasks.values()
    ssn.predicate(w0)
    calls: list[str] = []

    def counting(name: str, fn: Any) -> Any:
        def wrapped(task: Any) -> Any:
            calls.append(name)
            return fn(task)

        return wrapped

    for f in plugin.filters:
        if f.stable:
            object.__setattr__(f, "filter", counting(f.name, f.filter))
    ssn.predicate(w1)
    assert calls == []
    plugin._template_cache.clear()
    ssn.predicate(w1)
    assert calls == ["NodeUnschedulable", "NodeAffinity", "TaintToleration"]
