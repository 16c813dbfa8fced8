"""The usage plugin's ``elasticsearch`` source: metricbeat's documents averaged per node
(Volcano's ``ElasticsearchMetricsClient.NodeMetricsAvg`` and its tests of the default and custom
index), against a server answering Elasticsearch's search API over real HTTP."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from caldera.outside.metrics import MetricsSettings, UsageSource
from loopback import reply, serving

AVERAGES = {"n1": (0.42, 0.6), "n2": (0.05, 0.1)}
"""Each node's average ``host.cpu.usage`` and ``system.memory.actual.used.pct`` (fractions)."""


class _Search(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, dict[str, Any], str]]] = []

    def do_POST(self) -> None:
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Search.seen.append((self.path, query, self.headers.get("Authorization", "")))
        field = query["aggs"]["nodes"]["terms"]["field"]
        (asked,) = [m["terms"][field] for m in query["query"]["bool"]["must"] if "terms" in m]
        buckets = [
            {"key": name, "cpu": {"value": cpu}, "mem": {"value": mem}}
            for name, (cpu, mem) in AVERAGES.items()
            if name in asked
        ]
        buckets.append({"key": "n3", "cpu": {"value": None}, "mem": {"value": None}})
        reply(self, json.dumps({"aggregations": {"nodes": {"buckets": buckets}}}).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def elasticsearch() -> Iterator[str]:
    _Search.seen = []
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Search)) as url:
        yield url


async def test_each_nodes_average_load_comes_from_metricbeats_documents(
    elasticsearch: str,
) -> None:
    source = UsageSource(dict, lambda: ["n1", "n2", "n3"], clock=lambda: 1000.0)
    settings = MetricsSettings.of({"type": "elasticsearch", "address": elasticsearch})
    assert settings is not None
    await source.refresh(settings)
    assert source.problem == ""
    assert source.usage["n1"].cpu == pytest.approx(42) and source.usage["n1"].memory == 60
    assert source.usage["n2"].cpu == pytest.approx(5) and source.usage["n2"].measured == 1000.0
    assert "n3" not in source.usage  # no documents: no reading, rather than Go's 0%
    ((path, query, auth),) = _Search.seen  # one search for every node
    assert path == "/metricbeat-*/_search" and auth == ""
    window = query["query"]["bool"]["must"][0]["range"]["@timestamp"]
    assert window == {"gte": "now-10m", "lt": "now"}
    assert query["aggs"]["nodes"]["terms"]["field"] == "host.hostname"
    assert query["aggs"]["nodes"]["aggs"]["cpu"] == {"avg": {"field": "host.cpu.usage"}}


async def test_the_index_host_field_and_credentials_come_from_the_policy(
    elasticsearch: str,
) -> None:
    source = UsageSource(dict, lambda: ["n1"])
    settings = MetricsSettings.of(
        {
            "type": "elasticsearch",
            "address": elasticsearch + "/",
            "elasticsearch.index": "custom-index",
            "elasticsearch.hostnameFieldName": "agent.name",
            "elasticsearch.username": "volcano",
            "elasticsearch.password": "s3cret",
        }
    )
    assert settings is not None
    await source.refresh(settings)
    ((path, query, auth),) = _Search.seen
    assert path == "/custom-index/_search"
    assert query["aggs"]["nodes"]["terms"]["field"] == "agent.name"
    assert auth == "Basic " + base64.b64encode(b"volcano:s3cret").decode()
    assert set(source.usage) == {"n1"}


async def test_an_elasticsearch_that_is_down_leaves_the_last_values(elasticsearch: str) -> None:
    states: list[bool] = []
    source = UsageSource(dict, lambda: ["n1"], on_state=states.append)
    good = MetricsSettings.of({"type": "elasticsearch", "address": elasticsearch})
    down = MetricsSettings.of({"type": "elasticsearch", "address": "http://127.0.0.1:9"})
    assert good is not None and down is not None
    await source.refresh(good)
    await source.refresh(down)
    assert states == [True, False] and source.problem
    assert set(source.usage) == {"n1"}  # the last values stay, and age
