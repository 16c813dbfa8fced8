"""The webhook server's life: its certificate shared through a Secret, a server that cannot start
leaving scheduling alone, and ``--enabled-admission`` read as Volcano's webhook manager reads it."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from caldera.admission.hooks import HOOKS, enabled_hooks
from caldera.errors import ConfigError
from caldera.k8s.client import load_configuration
from caldera.k8s.rest import Rest
from caldera.k8s.secrets import shared_tls
from caldera.operator.webhooks.tls import self_signed
from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, wait_bound
from integration.test_daemon import _one_line_and_code


async def test_replicas_that_start_together_share_one_certificate(k8s: K8sHandle) -> None:
    k8s.needs_emulator("counts the Secret's create requests")
    made: list[bytes] = []

    def make() -> tuple[bytes, bytes]:
        cert = self_signed(["caldera-webhook.default.svc"])
        made.append(cert.cert)
        return cert.cert, cert.key

    rests = [Rest(await load_configuration(str(k8s.kubeconfig_path))) for _ in range(3)]
    try:
        got = await asyncio.gather(
            *(shared_tls(rest, "default", "caldera-webhook-tls", make) for rest in rests)
        )
        again = await shared_tls(rests[0], "default", "caldera-webhook-tls", make)
    finally:
        for rest in rests:
            await rest.close()
    assert len({cert for cert, _ in got}) == 1
    assert again == got[0]
    assert got[0][0] in made
    created = k8s.find_requests(verb="create", resource="secrets")
    assert sum(1 for r in created if r.status == 201) == 1


async def test_a_webhook_server_that_cannot_start_leaves_scheduling_alone(
    k8s: K8sHandle, caplog: pytest.LogCaptureFixture
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1"))
    await k8s.create("pods", pod("p0", namespace=ns), namespace=ns)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with running_operator(
            k8s, enabled_admission="all", webhook_port=port, webhook_namespace=ns
        ) as runtime:
            await wait_bound(k8s, "p0")
            assert runtime.webhook_server is not None
            assert not runtime.webhook_server.serving.is_set()
            # the failed start is logged by the server's own task, which a loaded machine may
            # run after the pod is bound
            async with asyncio.timeout(10):
                while not any(
                    "admission webhooks are not served" in r.getMessage() for r in caplog.records
                ):
                    await asyncio.sleep(0.05)


def test_enabled_admission_takes_volcanos_paths_or_all() -> None:
    hooks = enabled_hooks("/queues/validate, /pods/mutate,/queues/validate")
    assert [h.path for h in hooks] == ["/queues/validate", "/pods/mutate"]
    assert enabled_hooks("all") == list(HOOKS)
    assert enabled_hooks("") == []


def test_a_path_caldera_does_not_serve_is_named_with_the_nearest_one() -> None:
    with pytest.raises(ConfigError) as caught:
        enabled_hooks("/queue/validate")
    assert str(caught.value).startswith(
        "--enabled-admission: '/queue/validate' is not an admission webhook Caldera serves "
        "(did you mean '/queues/validate'?)"
    )


async def test_caldera_run_refuses_an_unknown_webhook_in_one_line(tmp_path: Path) -> None:
    code, err = await _one_line_and_code(
        "--enabled-admission", "/jobs/mutate", "--kubeconfig", str(tmp_path / "nope")
    )
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith("caldera: --enabled-admission: '/jobs/mutate' is not an admission")
