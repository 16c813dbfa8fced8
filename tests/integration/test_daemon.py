"""``caldera run`` as a process: it starts fast, says what is wrong in one line, stops cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

import aiohttp

from caldera.operator.app import Runtime
from emulator.handles import K8sHandle, write_kubeconfig
from integration.harness import node, pod, running_operator, wait_bound

OPERATOR_ROOT = Path(__file__).resolve().parents[2] / "operator"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _caldera(*args: str, log: IO[bytes] | None = None) -> asyncio.subprocess.Process:
    """``caldera run ARGS`` in a process of its own; stderr to ``log`` when given (a pipe
    nobody reads while it runs would fill up and stall it), else to a pipe."""
    env = {**os.environ, "PYTHONPATH": str(OPERATOR_ROOT)}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caldera",
        "run",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=log if log is not None else asyncio.subprocess.PIPE,
        env=env,
    )


async def _one_line_and_code(*args: str) -> tuple[int, str]:
    proc = await _caldera(*args)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_a_missing_kubeconfig_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    code, err = await _one_line_and_code("--kubeconfig", str(tmp_path / "nope"))
    assert code == 2
    assert err.splitlines() == [
        (
            f"caldera: kubeconfig {tmp_path / 'nope'} does not exist"
            " (and this is not a pod in a cluster)"
        )
    ]


async def test_an_invalid_kubeconfig_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [\n")
    code, err = await _one_line_and_code("--kubeconfig", str(broken))
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"caldera: invalid kubeconfig {broken}:")


async def test_an_api_server_that_does_not_answer_is_one_line_and_exit_code_2(
    tmp_path: Path,
) -> None:
    port = _free_port()  # nothing listens there
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
    code, err = await _one_line_and_code("--kubeconfig", str(kubeconfig), "--api-wait", "1s")
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith(f"caldera: cannot reach the API server at http://127.0.0.1:{port}")


@contextlib.asynccontextmanager
async def _running(
    k8s: K8sHandle, log: Path, *extra: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    health = f"127.0.0.1:{_free_port()}"
    stderr = log.open("wb")
    proc = await _caldera(
        "--kubeconfig",
        str(k8s.kubeconfig_path),
        "--leader-elect=false",
        "--listen-address",
        "",
        "--healthz-address",
        health,
        "--log-format",
        "plain",
        *extra,
        log=stderr,
    )
    try:
        yield proc, f"http://{health}"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        stderr.close()


async def _ready_after(
    url: str, started: float, proc: asyncio.subprocess.Process, timeout: float = 60.0
) -> float:
    async with aiohttp.ClientSession() as session:
        while time.monotonic() - started < timeout and proc.returncode is None:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"{url}/readyz") as resp:
                    if resp.status == 200:
                        return time.monotonic() - started
            await asyncio.sleep(0.05)
    raise AssertionError(f"never ready (exit code {proc.returncode})")


async def test_sigterm_stops_it_cleanly_and_a_quiet_cluster_leaves_a_quiet_log(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    await k8s.create("nodes", node("n1"))
    await k8s.create("pods", pod("p", namespace=k8s.namespace), namespace=k8s.namespace)
    stderr = tmp_path / "stderr"
    async with _running(k8s, stderr, "--schedule-period", "0.1s") as (proc, url):
        await _ready_after(url, time.monotonic(), proc)
        await wait_bound(k8s, "p")
        await asyncio.sleep(2.0)  # twenty idle sessions
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), timeout=15)
    log = stderr.read_text()
    assert proc.returncode == 0, log
    assert "Traceback" not in log and "BrokenProcessPool" not in log
    sessions = [line for line in log.splitlines() if "session:" in line]
    assert len(sessions) == 1, log  # the one session that bound something; quiet ones say nothing
    assert not [line for line in log.splitlines() if "Handler" in line], log


async def test_with_pods_pending_at_start_it_is_ready_and_binding_within_seconds(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    for i in range(20):
        await k8s.create("nodes", node(f"n{i:02}", cpu="64", memory="256Gi"))
    names = [f"backlog-{i:04}" for i in range(1000)]
    for name in names:
        await k8s.create(
            "pods", pod(name, cpu="100m", namespace=k8s.namespace), namespace=k8s.namespace
        )
    started = time.monotonic()
    async with _running(k8s, tmp_path / "stderr") as (proc, url):
        ready = await _ready_after(url, started, proc)
        await wait_bound(k8s, names[0], timeout=30)
        first_bind = time.monotonic() - started
        await wait_bound(k8s, *names, timeout=60)
    # generous bounds (a loaded CI machine): the point is seconds, not the half-minute it was
    assert ready < 15, ready
    assert first_bind < 20, first_bind


def _leads(runtime: Runtime) -> bool:
    return runtime.leader.leading


async def test_a_leader_stopped_by_sigterm_hands_over_at_once(
    k8s: K8sHandle, tmp_path: Path
) -> None:
    ns = k8s.namespace
    await k8s.create("nodes", node("n1", cpu="8"))
    flags = [
        "--leader-elect=true",
        f"--leader-elect-resource-namespace={ns}",
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=1s",
    ]
    async with _running(k8s, tmp_path / "stderr", *flags) as (first, _):
        holder = await k8s.wait_for(
            "leases",
            "volcano",
            lambda o: bool(o["spec"].get("holderIdentity")),
            namespace=ns,
            timeout=30,
        )
        election = {
            "leader_elect": True,
            "lock_namespace": ns,
            "lease_duration": 15.0,
            "renew_deadline": 10.0,
            "retry_period": 1.0,
        }
        async with running_operator(k8s, **election) as second:
            await asyncio.sleep(1.5)
            assert not _leads(second)  # the first holds the Lease
            first.send_signal(signal.SIGTERM)
            await asyncio.wait_for(first.wait(), timeout=15)
            stopped = time.monotonic()
            assert first.returncode == 0
            for _ in range(100):
                if _leads(second):
                    break
                await asyncio.sleep(0.1)
            # a released Lease is taken at the standby's next try, not after 15 s
            assert _leads(second) and time.monotonic() - stopped < 5
            lease = await k8s.get("leases", "volcano", namespace=ns)
            assert lease["spec"]["holderIdentity"] == second.leader.identity
            assert lease["spec"]["holderIdentity"] != holder["spec"]["holderIdentity"]
            await k8s.create("pods", pod("after-handover", namespace=ns), namespace=ns)
            await wait_bound(k8s, "after-handover")
