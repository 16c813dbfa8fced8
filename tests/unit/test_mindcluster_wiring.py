"""How MindCluster's ConfigMaps reach a session: the kind table's label selectors, the manifest
loader, the operator's cache fed by one informer per selector, and the node annotations it keeps
current. (The sessions themselves: ``tests/scenarios/test_mindcluster.py``.)"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from caldera.models.core import ConfigMap
from caldera.models.kinds import KINDS, selector_query, with_named
from caldera.operator.watch.cache import Cache
from caldera.simulate.manifests import load_manifests
from integration.harness import node

CONFIG_MAP, NODE = KINDS["ConfigMap"], KINDS["Node"]
VOLCANO, CIM = "mx-consumer-volcano=true", "mx-consumer-cim=true"


def cm(name: str, labels: dict[str, str], data: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "mindx-dl", "uid": name, "labels": labels},
        "data": data or {},
    }


class Counter:
    def __init__(self) -> None:
        self.news = 0

    def poke(self) -> None:
        self.news += 1


def test_only_configmaps_labelled_for_mindclusters_consumers_are_read() -> None:
    assert CONFIG_MAP.label_selectors == (VOLCANO, CIM)
    assert CONFIG_MAP.selects({"mx-consumer-volcano": "true"})
    assert CONFIG_MAP.selects({"mx-consumer-cim": "true", "app": "x"})
    assert not CONFIG_MAP.selects({"mx-consumer-cim": "false"})
    assert not CONFIG_MAP.selects({})
    assert NODE.selects({})


def test_a_manifests_other_configmaps_are_ignored_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "cms.yaml"
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-info-node-cm\n"
        "  namespace: mindx-dl\n  labels: {mx-consumer-volcano: 'true'}\ndata:\n"
    )
    loaded = load_manifests([str(path)])
    said = f"ignored ConfigMap settings: not labelled {VOLCANO} or {CIM}, the only ConfigMaps"
    assert loaded.notes == [f"{path}: {said} the scheduler reads"]
    assert loaded.warnings == []
    kept = loaded.state.config_maps["mindx-dl/cluster-info-node-cm"]
    assert isinstance(kept, ConfigMap) and kept.data is None


def test_the_cache_is_synced_once_each_selectors_informer_has_listed() -> None:
    counter = Counter()
    cache = Cache(["volcano"], kinds=[CONFIG_MAP], on_news=counter.poke)
    cache.replace(CONFIG_MAP, [cm("a", {"mx-consumer-volcano": "true"})], VOLCANO)
    assert not cache.synced.is_set()
    cache.replace(CONFIG_MAP, [], CIM)
    assert cache.synced.is_set()
    assert list(cache.state.config_maps) == ["mindx-dl/a"]


def test_an_object_stays_while_one_selectors_informer_still_holds_it() -> None:
    """A ConfigMap labelled for both consumers is seen by both informers: leaving one view (a
    label taken off, a relist without it) keeps it; leaving both drops it."""
    both = cm("both", {"mx-consumer-volcano": "true", "mx-consumer-cim": "true"})
    cache = Cache(["volcano"], kinds=[CONFIG_MAP])
    cache.replace(CONFIG_MAP, [both, cm("v", {"mx-consumer-volcano": "true"})], VOLCANO)
    cache.replace(CONFIG_MAP, [both], CIM)
    cache.replace(CONFIG_MAP, [], CIM)  # a relist of the other view drops nothing of this one
    assert set(cache.state.config_maps) == {"mindx-dl/both", "mindx-dl/v"}
    cache.apply(CONFIG_MAP, "ADDED", both, CIM)
    cache.apply(CONFIG_MAP, "DELETED", both, VOLCANO)
    assert set(cache.state.config_maps) == {"mindx-dl/both", "mindx-dl/v"}
    cache.apply(CONFIG_MAP, "DELETED", both, CIM)
    assert set(cache.state.config_maps) == {"mindx-dl/v"}


def test_a_device_list_update_is_news() -> None:
    counter = Counter()
    cache = Cache(["volcano"], kinds=[CONFIG_MAP], on_news=counter.poke)
    listed = cm("cluster-info-device-0", {"mx-consumer-volcano": "true"}, {"k": "1"})
    cache.apply(CONFIG_MAP, "ADDED", listed, VOLCANO)
    before = counter.news
    changed = copy.deepcopy(listed)
    changed["data"] = {"k": "2"}
    cache.apply(CONFIG_MAP, "MODIFIED", changed, VOLCANO)
    assert counter.news == before + 1
    assert cache.state.config_maps["mindx-dl/cluster-info-device-0"].data == {"k": "2"}


def test_the_cache_keeps_a_nodes_free_chip_list_current() -> None:
    """``huawei.com/Ascend310P`` and ``baseDeviceInfos`` are read by the session: a change is
    stored and is news (other annotations, a node lock, are not)."""
    counter = Counter()
    cache = Cache(["volcano"], kinds=[NODE], on_news=counter.poke)
    raw = node("n1")
    raw["metadata"]["uid"] = "u1"
    raw["metadata"]["annotations"] = {"huawei.com/Ascend310P": "Ascend310P-0,Ascend310P-1"}
    cache.apply(NODE, "ADDED", raw)
    before = counter.news
    noise = copy.deepcopy(raw)
    noise["metadata"]["annotations"]["other"] = "x"
    cache.apply(NODE, "MODIFIED", noise)
    assert counter.news == before
    taken = copy.deepcopy(noise)
    taken["metadata"]["annotations"]["huawei.com/Ascend310P"] = "Ascend310P-1"
    cache.apply(NODE, "MODIFIED", taken)
    assert counter.news == before + 1
    annotations = cache.state.nodes["n1"].metadata.annotations
    assert annotations["huawei.com/Ascend310P"] == "Ascend310P-1"


def test_an_object_the_policy_names_is_read_by_field_selector_besides_the_labelled_ones() -> None:
    """``with_named``: the device ConfigMap deviceshare is pointed at gets an informer of its own;
    a kind read whole needs none."""
    named = [("ConfigMap", "kube-system/hami-scheduler-device"), ("Node", "n1")]
    kinds = with_named(KINDS, named)
    field = "field:metadata.namespace=kube-system,metadata.name=hami-scheduler-device"
    assert kinds["ConfigMap"].selectors == (VOLCANO, CIM, field)
    assert selector_query(field) == {
        "fieldSelector": "metadata.namespace=kube-system,metadata.name=hami-scheduler-device"
    }
    assert selector_query(VOLCANO) == {"labelSelector": VOLCANO}
    assert kinds["Node"].selectors == ("",) and selector_query("") == {}
    assert kinds["ConfigMap"].selects({}, "kube-system/hami-scheduler-device")
    assert not kinds["ConfigMap"].selects({}, "kube-system/other")


def test_a_manifests_configmap_the_policy_names_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "cms.yaml"
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dev, namespace: kube-system}\n"
        "data: {a: b}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dev}\ndata: {a: b}\n"
    )
    loaded = load_manifests([str(path)], named=[("ConfigMap", "kube-system/dev")])
    assert list(loaded.state.config_maps) == ["kube-system/dev"]
    assert len(loaded.notes) == 1 and "ignored ConfigMap dev:" in loaded.notes[0]
