"""The Grafana dashboard in ``dashboards/``: it parses, it asks only for series ``/metrics`` serves,
and it follows whichever Prometheus data source the user picks.

The exported names come from the registries themselves (our metrics and HAMi's device collector),
so renaming a metric without the dashboard, or the other way round, fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from caldera.cache.state import ClusterState
from caldera.devices.vendors import VENDORS
from caldera.operator.device_metrics import DeviceCollector
from caldera.operator.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "caldera.json"
DATASOURCE = "${datasource}"

# What each kind of family is exposed as (the Python client keeps ``_total`` off a counter's name).
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "bool", "le", "inf", "nan",
}  # fmt: skip


def exported_series() -> set[str]:
    registry = CollectorRegistry()
    Metrics(registry)
    registry.register(DeviceCollector(lambda: ClusterState(), lambda: VENDORS))
    return {
        family.name + suffix for family in registry.collect() for suffix in SUFFIXES[family.type]
    }


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects: identifiers left once strings, label
    matchers, ranges and grouping clauses are taken out, that are not functions or keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        word, rest = match.group(), text[match.end() :].lstrip()
        if rest.startswith("(") or word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def load() -> dict[str, Any]:
    with DASHBOARD.open(encoding="utf-8") as stream:
        dashboard: dict[str, Any] = json.load(stream)
    return dashboard


def all_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def expressions() -> list[str]:
    return [t["expr"] for p in all_panels(load()["panels"]) for t in p.get("targets", [])]


def test_the_name_parser_finds_series_and_skips_functions_labels_and_keywords() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, action) (rate(a_bucket{x=~"$q"}[5m])))'
        " / on (queue_name) b_total offset 5m or vector(0) + c"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}


@pytest.mark.parametrize("expr", expressions())
def test_every_query_asks_only_for_series_the_scheduler_exports(expr: str) -> None:
    names = metric_names(expr)
    assert names, f"no metric in {expr!r}"
    assert names <= exported_series(), sorted(names - exported_series())


def test_the_template_variables_read_exported_series() -> None:
    for variable in load()["templating"]["list"]:
        if variable["type"] == "query":
            found = re.fullmatch(r"label_values\((\w+), \w+\)", variable["query"]["query"])
            assert found is not None, variable["name"]
            assert found.group(1) in exported_series(), variable["name"]


def test_the_dashboard_covers_what_the_issue_asks_for() -> None:
    used = set().union(*(metric_names(e) for e in expressions()))
    wanted = {
        "volcano_e2e_scheduling_latency_milliseconds_bucket",
        "volcano_action_scheduling_latency_milliseconds_bucket",
        "caldera_binds_total",
        "volcano_schedule_attempts_total",
        "caldera_pending_pods",
        "caldera_pending_podgroups",
        "volcano_queue_deserved_milli_cpu",
        "volcano_queue_allocated_milli_cpu",
        "volcano_queue_deserved_memory_bytes",
        "volcano_queue_allocated_scalar_resources",
        "volcano_eviction_transactions_total",
        "volcano_total_preemption_attempts",
        "hami_gpu_memory_allocated_bytes",
        "hami_gpu_core_allocated_ratio",
        "caldera_api_requests_total",
    }
    assert wanted <= used, sorted(wanted - used)


def test_panel_ids_are_unique_and_panels_do_not_overlap() -> None:
    panels = list(all_panels(load()["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for row in range(pos["y"], pos["y"] + pos["h"]):
            for col in range(pos["x"], pos["x"] + pos["w"]):
                assert (row, col) not in cells, f"{panel['title']} overlaps {cells[(row, col)]}"
                cells[(row, col)] = panel["title"]


def test_every_query_uses_the_data_source_the_user_picks() -> None:
    dashboard = load()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in all_panels(dashboard["panels"]):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == DATASOURCE, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == DATASOURCE, panel["title"]
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == DATASOURCE, variable["name"]
