"""The binder's last look at a node another scheduler shares (soft sharding): the API server
lists the node's pods, and a pod that no longer fits beside them is not bound, though the
scheduler's own view (its informers, a moment behind) still has room."""

from __future__ import annotations

import pytest

from builders import node, pod, state_of
from caldera.framework.intents import Bind
from caldera.k8s.client import load_configuration
from caldera.k8s.rest import Rest
from caldera.models.core import Pod, effective_requests
from caldera.operator.writers.recheck import NodeRecheck, overfilled
from emulator.handles import K8sHandle
from integration.harness import node as api_node
from integration.harness import pod as api_pod


@pytest.mark.parametrize(
    ("others", "asked", "why"),
    [
        pytest.param([], ("2", "1Gi"), None, id="an empty node"),
        pytest.param([pod("a", cpu="1")], ("1", "1Gi"), None, id="exactly full"),
        pytest.param([pod("a", cpu="2")], ("1", "1Gi"), "cpu 3000m > 2000m", id="one cpu short"),
        pytest.param(
            [pod("a", cpu="1", memory="7Gi")],
            ("1", "2Gi"),
            "memory 9.66368e+09 > 8.58993e+09",
            id="memory short, cpu fine",
        ),
    ],
)
def test_overfilled(others: list[Pod], asked: tuple[str, str], why: str | None) -> None:
    allocatable = node("n", cpu="2", memory="8Gi").allocatable
    cpu, memory = asked
    assert (
        overfilled(allocatable, others, effective_requests(pod("p", cpu=cpu, memory=memory).spec))
        == why
    )


async def test_a_node_filled_by_another_scheduler_refuses_the_binding(k8s: K8sHandle) -> None:
    k8s.needs_emulator("it creates a pod already bound")
    await k8s.create("nodes", api_node("shared", cpu="2", memory="8Gi"))
    theirs = api_pod("theirs", scheduler="agent", cpu="2")
    theirs["spec"]["nodeName"] = "shared"  # the other scheduler won the race
    await k8s.create("pods", theirs, namespace=k8s.namespace)
    mine = pod("mine", cpu="1", namespace=k8s.namespace)
    stale = state_of([node("shared", cpu="2", memory="8Gi"), mine])  # our view: an empty node
    rest = Rest(await load_configuration(str(k8s.kubeconfig_path)))
    try:
        check = NodeRecheck(rest, lambda: stale)
        bind = Bind(k8s.namespace, "mine", mine.metadata.uid, "shared", recheck=True)
        why = await check(bind)
        assert why == (
            "node shared was filled by another scheduler before the binding (cpu 3000m > 2000m)"
        )
        await k8s.delete("pods", "theirs", namespace=k8s.namespace)
        assert await check(bind) is None
    finally:
        await rest.close()
