"""The usage plugin's node load from a real Prometheus (Debian's ``prometheus``), scraping an
exporter this test serves in node-exporter's format: the source's queries (Volcano's
``PrometheusMetricsClient``), a source that is down, and the operator steering a pod off a hot
node.

Volcano's queries average ``rate(...[5m])`` over ``[10m:30s]``: right only with 10 minutes of
history, which the exporter makes up by stamping its samples from 16 minutes back."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from caldera.outside.metrics import MetricsSettings, UsageSource
from emulator.handles import K8sHandle
from integration.harness import node, pod, running_operator, wait_bound

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="needs Debian's prometheus package (.ci/run installs it)"
)
BUSY = {"hot": 0.90, "cool": 0.20}
"""Each node's CPU use (all of its one CPU)."""
MEMORY = {"hot": (8e9, 2e9), "cool": (8e9, 6e9)}
"""Each node's (total, available) memory: 75% and 25% in use."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_EXPORTER = """
import http.server, time
BUSY, MEMORY = {busy!r}, {memory!r}
clock = [time.time() - 16 * 60]


class Metrics(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        # node-exporter's series with their own timestamps, which start 16 minutes back and
        # move a minute a scrape until they reach now: Prometheus gets the history Volcano's
        # rate(...[5m]) within [10m:30s] averages needs in about 16 s instead of 15 minutes
        clock[0] = min(clock[0] + 60, time.time())
        at, stamp = clock[0], int(clock[0] * 1000)
        out = ["# TYPE node_cpu_seconds_total counter"]
        for name, busy in BUSY.items():
            idle = 1000 + (at - 1.7e9) * (1 - busy)
            out.append(
                'node_cpu_seconds_total{{cpu="0",mode="idle",instance="%s"}} %f %d'
                % (name, idle, stamp)
            )
        for name, (total, available) in MEMORY.items():
            out.append('node_memory_MemTotal_bytes{{instance="%s"}} %f %d' % (name, total, stamp))
            out.append(
                'node_memory_MemAvailable_bytes{{instance="%s"}} %f %d' % (name, available, stamp)
            )
        body = ("\\n".join(out) + "\\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)


http.server.HTTPServer(("127.0.0.1", {port}), Metrics).serve_forever()
"""


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prometheus on loopback scraping an exporter every second; yields its address."""
    folder = Path(tmp_path_factory.mktemp("prometheus"))
    exporter_port, port = _free_port(), _free_port()
    exporter = subprocess.Popen(  # a process of its own: the test loops come and go
        ["python3", "-c", _EXPORTER.format(busy=BUSY, memory=MEMORY, port=exporter_port)]
    )
    config = folder / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: nodes\n"
        "    honor_labels: true\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n"
    )
    assert PROMETHEUS is not None
    server = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{address}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise AssertionError("prometheus did not become ready")
        yield address
    finally:
        server.terminate()
        exporter.terminate()
        server.wait(10)
        exporter.wait(10)


def _settled(source: UsageSource) -> bool:
    return all(
        name in source.usage and abs(source.usage[name].cpu - busy * 100) <= 3
        for name, busy in BUSY.items()
    )


async def _caught_up(source: UsageSource, settings: MetricsSettings) -> None:
    """Refresh until the exporter's history has reached now (both nodes read their load)."""
    async with asyncio.timeout(90):
        while not _settled(source):
            await source.refresh(settings)
            await asyncio.sleep(1)


async def test_the_source_reads_each_nodes_cpu_and_memory_use(prometheus: str) -> None:
    source = UsageSource(dict, lambda: ["hot", "cool"])
    settings = MetricsSettings("prometheus", prometheus, 1.0, False)
    await _caught_up(source, settings)
    hot, cool = source.usage["hot"], source.usage["cool"]
    assert hot.cpu == pytest.approx(90, abs=3)
    assert cool.cpu == pytest.approx(20, abs=3)
    assert hot.memory == pytest.approx(75)
    assert cool.memory == pytest.approx(25)
    assert source.problem == ""


async def test_a_source_that_is_down_keeps_the_last_values_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    states: list[bool] = []
    source = UsageSource(dict, lambda: ["hot"], on_state=states.append)
    settings = MetricsSettings("prometheus", f"http://127.0.0.1:{_free_port()}", 1.0, False)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            await source.refresh(settings)
    assert source.usage == {} and source.problem
    assert states == [False, False, False]
    said = [r for r in caplog.records if "gives no node load" in r.getMessage()]
    assert len(said) == 1


async def test_the_scheduler_keeps_a_pod_off_a_node_whose_real_load_is_high(
    k8s: K8sHandle, tmp_path: Path, prometheus: str
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n"
        "- plugins: [{name: priority}, {name: gang}]\n"
        "- plugins: [{name: predicates}, {name: proportion}, {name: usage, arguments: "
        "{thresholds: {cpu: 80, mem: 80}}}]\n"
        "metrics:\n"
        "  type: prometheus\n"
        f"  address: {prometheus}\n"
        "  interval: 1s\n"
    )
    ns = k8s.namespace
    await k8s.create("nodes", node("hot", cpu="8"))
    await k8s.create("nodes", node("cool", cpu="2"))
    async with running_operator(k8s, scheduler_conf=str(conf)) as runtime:
        assert runtime.usage is not None
        async with asyncio.timeout(90):
            while not _settled(runtime.usage):
                await asyncio.sleep(0.5)
        await k8s.create("pods", pod("p", namespace=ns), namespace=ns)
        placed = await wait_bound(k8s, "p")
    assert placed == {"p": "cool"}  # hot has more room, but it is 90% busy
