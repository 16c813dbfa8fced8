"""An API server that goes away mid-burst: two log lines, every pod bound once when it is back."""

from __future__ import annotations

import asyncio
import logging

import pytest

from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, wait_bound


async def test_an_outage_is_two_log_lines_and_every_pod_binds_once_when_it_ends(
    k8s: K8sHandle, caplog: pytest.LogCaptureFixture
) -> None:
    names = [f"p-{i}" for i in range(30)]
    await k8s.create("nodes", node("n1", cpu="64", memory="64Gi"))
    # the binds in flight are held, then cut off with everything else: the server is gone
    held = k8s.hang_next(
        verb="create", resource="pods", subresource="binding", times=None, seconds=1.0
    )
    with caplog.at_level(logging.WARNING):
        async with running_operator(k8s):
            for name in names:
                await k8s.create("pods", pod(name), namespace="default")
            while not held.hits:
                await asyncio.sleep(0.05)
            gone = k8s.drop_next(times=None)
            await asyncio.sleep(2.5)
            k8s.clear_faults()
            assert gone.hits > len(names)  # retried through the outage
            await wait_bound(k8s, *names, timeout=60)
    bindings = [
        r.name
        for r in k8s.find_requests(verb="create", resource="pods", subresource="binding")
        if r.status is not None and 200 <= r.status < 300
    ]
    assert sorted(bindings) == sorted(names)  # each exactly once
    said = [r.getMessage() for r in caplog.records if r.name.startswith("caldera")]
    assert len([m for m in said if "the API server is unreachable" in m]) == 1, said
    back = [m for m in said if "the API server is reachable again" in m]
    assert len(back) == 1 and "retried" in back[0], said
    assert not [m for m in said if m.startswith("bind ")], said
