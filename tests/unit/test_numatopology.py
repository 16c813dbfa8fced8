"""Numatopology (``nodeinfo.volcano.sh/v1alpha1``): read from manifests and by the operator's
watch into the cluster state, one per node; a cpuset that does not parse is reported and the
object skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from caldera.models.numa import Numatopology, parse_cpuset
from caldera.simulate.manifests import load_manifests


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        pytest.param("0-3,8", {0, 1, 2, 3, 8}, id="a range and a cpu"),
        pytest.param("", set(), id="empty: none"),
        pytest.param("5", {5}, id="one cpu"),
        pytest.param(" 1-2 , 4 ", {1, 2, 4}, id="spaces"),
    ],
)
def test_cpuset_lists_read_as_the_kubelet_writes_them(text: str, cpus: set[int]) -> None:
    assert parse_cpuset(text) == cpus


@pytest.mark.parametrize("text", ["0-", "a", "3-1", "1,,x"])
def test_a_cpuset_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpuset(text)


def test_simulate_reads_a_nodes_topology_and_reports_a_broken_one(tmp_path: Path) -> None:
    manifest = tmp_path / "numa.yaml"
    manifest.write_text(
        """\
apiVersion: nodeinfo.volcano.sh/v1alpha1
kind: Numatopology
metadata: {name: node-1}
spec:
  policies: {CPUManagerPolicy: static, TopologyManagerPolicy: best-effort}
  numares:
    cpu: {allocatable: "0-3", capacity: 4}
  cpuDetail:
    "0": {numa: 0, socket: 0, core: 0}
    "1": {numa: 0, socket: 0, core: 1}
    "2": {numa: 1, socket: 1, core: 0}
    "3": {numa: 1, socket: 1, core: 1}
---
apiVersion: nodeinfo.volcano.sh/v1alpha1
kind: Numatopology
metadata: {name: node-2}
spec:
  numares:
    cpu: {allocatable: "zero-three"}
---
apiVersion: nodeinfo.volcano.sh/v1alpha1
kind: Numatopology
metadata: {name: node-3}
spec:
  resReserved: {cpu: "a few"}
"""
    )
    loaded = load_manifests([str(manifest)])
    topo = loaded.state.numatopologies["node-1"]
    assert isinstance(topo, Numatopology)
    assert topo.topology_manager_policy == "best-effort"
    assert topo.cpu_manager_policy == "static"
    assert topo.spec.numares["cpu"].cpus == {0, 1, 2, 3}
    assert {cpu: info.numa for cpu, info in topo.spec.cpu_detail.items()} == {
        0: 0,
        1: 0,
        2: 1,
        3: 1,
    }
    assert "node-2" not in loaded.state.numatopologies
    (warning,) = [w for w in loaded.warnings if "node-2" in w]
    assert "numares" in warning and "zero-three" in warning
    assert "node-3" not in loaded.state.numatopologies
    (reserved,) = [w for w in loaded.warnings if "node-3" in w]
    assert "resReserved" in reserved and "a few" in reserved
